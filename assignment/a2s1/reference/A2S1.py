# %% [markdown]
# # A2S1 — Understanding attention (staff solution)
# Attention here is softmax(q·kᵀ)·v with no scaling. Every answer below is built from `key`
# itself, so it holds for any key whose rows are (close to) unit vectors.

# %%
import torch
import torch.nn.functional as F

torch.manual_seed(447)
key = torch.randn(4, 3)
key = key / torch.norm(key, dim=1, keepdim=True)
key = key.round(decimals=2)
value = torch.randn(4, 3)
value = value / torch.norm(value, dim=1, keepdim=True)
value = value.round(decimals=2)


def attention(query, key, value):
    return F.scaled_dot_product_attention(query, key, value, scale=1)


# %% [markdown]
# ## 1.2 Selection and identity
# A large multiple of key[i] scores key i far above the others (rows are unit vectors, so
# k_i·k_i = 1 > k_i·k_j), and the softmax becomes one-hot.

# %%
# TODO: a query (1x3) whose output is value[0]
query121 = 100 * key[0:1]
print(attention(query121, key, value), value[0])

# %%
# TODO: a 4x3 query whose output is value
query122 = 100 * key
print(attention(query122, key, value) - value)

# %% [markdown]
# ## 1.3 Averaging
# A zero query scores every key 0: uniform weights. For the mean of value[0] and value[1] the
# query must score key 0 and key 1 equally and the others far lower: take key[0] + key[1] with
# its component along key[0] - key[1] removed, scaled up.

# %%
# TODO: a query whose output is the mean of all four values
query131 = torch.zeros(1, 3)
print(attention(query131, key, value), value.mean(0))

# %%
# TODO: a query whose output is the mean of value[0] and value[1]
u, d = key[0] + key[1], key[0] - key[1]
query132 = (100 * (u - (u @ d) / (d @ d) * d)).reshape(1, 3)
print(attention(query132, key, value), value[:2].mean(0))

# %% [markdown]
# Keeping query132, replace only row 2 of the key. Row 2 = key[0] scores as keys 0 and 1 do, so the
# output averages value[0..2]; 10·key[0] scores far above them, so the output is value[2].

# %%
# TODO: m_key such that the output is the mean of value[0], value[1] and value[2]
m_key = key.clone()
m_key[2] = key[0]
print(attention(query132, m_key, value), value[:3].mean(0))

# %%
# TODO: m_key such that the output is value[2]
m_key = key.clone()
m_key[2] = 10 * key[0]
print(attention(query132, m_key, value), value[2])

# %%
import matplotlib.pyplot as plt

plt.imshow(torch.softmax(query122 @ key.T, dim=-1))
plt.title("attention weights of query122")
plt.show()
