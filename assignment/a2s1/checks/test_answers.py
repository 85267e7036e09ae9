"""The notebook's answers, each judged by what our attention does with it on our key and value."""


def test_query121_selects(nb):
    nb.expect_output(nb.query("query121", rows=1), nb.key, [(0,)], "attention(query121, key, value)")


def test_query122_identity(nb):
    rows = nb.key.shape[0]
    nb.expect_output(nb.query("query122", rows=rows), nb.key, [(i,) for i in range(rows)],
                     "attention(query122, key, value)")


def test_query131_averages(nb):
    nb.expect_output(nb.query("query131", rows=1), nb.key, [tuple(range(nb.key.shape[0]))],
                     "attention(query131, key, value)")


def test_query132_averages_two(nb):
    nb.expect_output(nb.query("query132", rows=1), nb.key, [(0, 1)], "attention(query132, key, value)")


def test_m_key_mean_three(nb):
    nb.expect_output(nb.query("query132", rows=1), nb.modified_key(0), [(0, 1, 2)],
                     "attention(query132, m_key, value) with the first m_key")


def test_m_key_selects_2(nb):
    nb.expect_output(nb.query("query132", rows=1), nb.modified_key(1), [(2,)],
                     "attention(query132, m_key, value) with the second m_key")
