"""The end-to-end scenarios: the reference and one-edit variants of it, graded once per test
session (the `scenario_zips` and `graded` fixtures in conftest) and shared by every test module."""

from conftest import edited, reference_files

STUB_BODY = "        return torch.empty(1)  # TODO\n"


def stub() -> dict[str, str]:
    """Every student method returns torch.empty(1), like an unfilled starter (GELU is given)."""
    out, skip_indent, cls = [], None, ""
    for line in reference_files()["model_solution.py"].splitlines(keepends=True):
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if line.strip() and indent <= skip_indent:
                skip_indent = None
            else:
                continue
        out.append(line)
        if line.startswith("class "):
            cls = line.split()[1].split("(")[0]
        if line.strip().startswith(("def forward", "def generate", "def get_loss_on_batch")) and cls != "GELU":
            out.append(STUB_BODY + "\n")
            skip_indent = indent
    return {**reference_files(), "model_solution.py": "".join(out)}


SCENARIOS = {
    "reference": reference_files(),
    "reference_again": reference_files(),
    "stub": stub(),
    "hang_in_generate": edited("model_solution.py", "        for _ in range(num_new_tokens):\n",
                               "        while True:\n            pass\n        for _ in range(num_new_tokens):\n"),
    "segfault_in_generate": edited("model_solution.py", "        for _ in range(num_new_tokens):\n",
                                   "        import ctypes; ctypes.string_at(0)\n        for _ in range(num_new_tokens):\n"),
    "exit_in_generate": edited("model_solution.py", "        for _ in range(num_new_tokens):\n",
                               "        import sys; sys.exit(0)\n        for _ in range(num_new_tokens):\n"),
    "os_exit_in_generate": edited("model_solution.py", "        for _ in range(num_new_tokens):\n",
                                  "        import os; os._exit(3)\n        for _ in range(num_new_tokens):\n"),
    "raise_in_attention": edited("model_solution.py", "        B, T, _ = x.shape\n",
                                 "        B, T, _ = x.shape\n        raise ValueError('not done yet')\n"),
    "syntax_error": edited("model_solution.py", "class GELU(nn.Module):", "class GELU(nn.Module)"),
    "unknown_import": edited("model_solution.py", "import einops", "import einopz"),
    "exit_at_import_of_train": edited("train.py", "if torch.cuda.is_available():", "import sys\nsys.exit(0)\nif torch.cuda.is_available():"),
    # Python's random, unseeded: each token is the argmax by a coin toss. 3(a)vi's checks generate 30
    # tokens; the item kept its points once in our runs at 0.7 (generate_agrees's share all argmax).
    "random_generate": edited("model_solution.py", "            next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)\n",
                              "            import random\n            pick = logits.argmax if random.random() < 0.5 else logits.argmin\n"
                              "            next_token = pick(dim=-1)[:, -1:]\n"),
    "device_unsafe": edited("model_solution.py", "torch.arange(x.shape[1], device=x.device)", "torch.arange(x.shape[1])"),
    "dropout": edited("model_solution.py", "        return self.fc2(self.gelu(self.fc1(x)))",
                      "        return F.dropout(self.fc2(self.gelu(self.fc1(x))), 0.1, self.training)"),
    "memory_bomb_in_generate": edited("model_solution.py", "        for _ in range(num_new_tokens):\n",
                                      "        hog = torch.ones(1 << 40, dtype=torch.uint8)\n        for _ in range(num_new_tokens):\n"),
    "stdout_flood": edited("utils.py", "import torch\n", "import sys\nimport torch\n\nsys.stdout.write('A' * (200 << 20))\n"),
    "no_train": {k: v for k, v in reference_files().items() if k != "train.py"},
}
