"""A class to measure similarity tools on: real-style A3 submissions, untouched starters, and
disguised copies whose source is known. Shared by bench/similarity_vs_tools.py and
tests/test_similarity.py.

Real-style: a course's starter that is not this repository's template (COURSE_STARTER, written the
way course starters are: given code, `raise NotImplementedError` and `pass` stubs, TODO comments,
a method given in part) filled in with the method bodies of a corpus student
(tests/corpus/students/), who keeps what the course gave. An untouched starter is the starter as
handed out; a barely touched one has one method filled in.

The disguises, each applied to every file of a submission (what a student hiding a copy does):
rename (locals, parameters, functions), reorder (functions and methods), reformat (ast.unparse,
two-space indentation, blank lines), comments (every comment and docstring replaced, or removed),
dead code (an unused helper and unused statements), loop (every `for _ in range(n)` a `while`),
splice (two sources, class by class and function by function), and all of them at once.
"""

import ast
import io
import random
import textwrap
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "corpus" / "students"
REFERENCE = REPO / "reference" / "a3"
FILES = ("model_solution.py", "train.py", "utils.py")

_MODEL = '''\
"""Assignment 3, part (a): a decoder-only transformer in the style of GPT-2.

Implement every method marked YOUR CODE HERE. Do not rename classes or attributes: the
autograder loads pretrained weights by these names.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GPT2LMHeadModel

from utils import state_dict_converter


@dataclass
class ModelConfig:
    d_model: int
    n_heads: int
    n_layers: int
    context_length: int
    vocab_size: int


class CausalAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        assert config.d_model % config.n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads = config.n_heads
        self.d_attention = config.d_model // config.n_heads
        self.W_q = nn.Linear(config.d_model, config.d_model)
        self.W_k = nn.Linear(config.d_model, config.d_model)
        self.W_v = nn.Linear(config.d_model, config.d_model)
        self.W_o = nn.Linear(config.d_model, config.d_model)
        mask = torch.tril(torch.ones(config.context_length, config.context_length))
        self.register_buffer("causal_mask", mask.view(1, 1, config.context_length, config.context_length),
                             persistent=False)

    def forward(self, x):
        """Masked multi-head self-attention. x: (B, T, d_model); returns (B, T, d_model)."""
        B, T, _ = x.shape
        # YOUR CODE HERE: project to queries, keys and values, split the heads, mask, softmax,
        # merge the heads and apply W_o.
        raise NotImplementedError("CausalAttention.forward")


class GELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, 4 * config.d_model)
        self.fc2 = nn.Linear(4 * config.d_model, config.d_model)
        self.gelu = GELU()

    def forward(self, x):
        """fc1, GELU, fc2."""
        # YOUR CODE HERE
        pass


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.mlp = MLP(config)
        self.attention = CausalAttention(config)
        self.pre_layer_norm = nn.LayerNorm(config.d_model)
        self.post_layer_norm = nn.LayerNorm(config.d_model)

    def forward(self, x):
        """Pre-norm residual attention, then pre-norm residual MLP."""
        # YOUR CODE HERE
        raise NotImplementedError


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
        self.backbone = nn.ModuleList([DecoderBlock(config) for _ in range(config.n_layers)])
        self.final_layer_norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self):
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
            if isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def forward(self, x):
        """Token ids (B, T) to logits (B, T, vocab_size)."""
        B, T = x.shape
        assert T <= self.config.context_length, f"sequence of {T} tokens is longer than the context"
        # YOUR CODE HERE
        raise NotImplementedError

    @torch.no_grad()
    def generate(self, x, num_new_tokens):
        """Greedy decoding: append num_new_tokens argmax tokens to x."""
        self.eval()
        for _ in range(num_new_tokens):
            context = x[:, -self.config.context_length:]
            # YOUR CODE HERE: the logits of the last position, the argmax, appended to x
            raise NotImplementedError
        return x

    def get_loss_on_batch(self, input_ids):
        """Mean next-token cross entropy over the batch."""
        # YOUR CODE HERE
        raise NotImplementedError

    @classmethod
    def from_pretrained(cls):
        model = cls(ModelConfig(d_model=768, n_heads=12, n_layers=12, context_length=1024, vocab_size=50257))
        hf_model = GPT2LMHeadModel.from_pretrained("gpt2")
        model.load_state_dict(state_dict_converter(hf_model.state_dict()))
        return model
'''

_TRAIN = '''\
"""Assignment 3, part (b): training on TinyStories."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from datasets import load_dataset
from tqdm import tqdm
from transformers import AutoTokenizer

from model_solution import ModelConfig, Transformer

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def get_chunked_tinystories(chunk_size):
    dataset = load_dataset("roneneldan/TinyStories", split="train[:10%]")
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
    ids = []
    for story in tqdm(dataset["text"], desc="tokenising"):
        ids.extend(tokenizer(story)["input_ids"] + [tokenizer.eos_token_id])
    num_chunks = len(ids) // chunk_size
    return torch.tensor(ids[: num_chunks * chunk_size], dtype=torch.long).view(num_chunks, chunk_size)


def plot_results(losses, grad_norms, save_path):
    fig, (ax_loss, ax_norm) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(losses)
    ax_loss.set(xlabel="step", ylabel="loss", title="Training loss")
    ax_norm.plot(grad_norms)
    ax_norm.set(xlabel="step", ylabel="gradient norm", title="Gradient norm")
    fig.tight_layout()
    fig.savefig(save_path)
    plt.close(fig)


def train(learning_rate, gradient_clipping, model_config, batch_size, max_steps=None):
    """Train with AdamW; plot the losses and gradient norms to ./losses_and_grad_norms.png."""
    data_path = f"./datasets/tinystories_10pct_chunk_size_{model_config.context_length}.pt"
    if os.path.exists(data_path):
        data = torch.load(data_path)
    else:
        data = get_chunked_tinystories(model_config.context_length)
        os.makedirs(os.path.dirname(data_path), exist_ok=True)
        torch.save(data, data_path)
    # YOUR CODE HERE: the model, the optimizer, the training loop (loss, backward, clipping, step)
    raise NotImplementedError


if __name__ == "__main__":
    train(learning_rate=1e-5, gradient_clipping=1, batch_size=16, max_steps=100,
          model_config=ModelConfig(d_model=33, n_heads=3, n_layers=3, context_length=512, vocab_size=50257))
'''

_UTILS = '"""Given: Hugging Face GPT-2 weights renamed for model_solution.Transformer."""\n' + "".join(
    (REFERENCE / "utils.py").read_text().splitlines(keepends=True)[1:]
)
COURSE_STARTER = {"model_solution.py": _MODEL, "train.py": _TRAIN, "utils.py": _UTILS}


def corpus_students() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if (p / "model_solution.py").is_file())


def corpus_files(name: str) -> dict[str, str]:
    """A corpus student's three files (utils.py from the reference where the student has none)."""
    folder = CORPUS / name
    return {f: ((folder / f) if (folder / f).exists() else REFERENCE / f).read_text() for f in FILES}


# --- filling the course's starter with a student's code ---------------------------------------

_Def = ast.FunctionDef | ast.AsyncFunctionDef


def _placeholder(node: ast.stmt) -> bool:
    """A statement that stands for code still to write (contains one, for a loop or an if)."""
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return any(_placeholder(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))


def _defs(body: list[ast.stmt]) -> dict[str, _Def]:
    return {n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _fill(given: _Def, own: _Def | None) -> _Def:
    """A stub filled in: the given statements before the first placeholder kept, then the
    student's own body (docstring aside); a stub the student has no version of stays a stub."""
    if own is None or not any(_placeholder(s) for s in given.body):
        return given
    keep = []
    for stmt in given.body:
        if _placeholder(stmt):
            break
        keep.append(stmt)
    own_body = [s for s in own.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    given.body = keep + own_body
    given.args = own.args
    return given


def _fill_body(given: list[ast.stmt], own: list[ast.stmt]) -> list[ast.stmt]:
    own_defs = _defs(own)
    own_classes = {n.name: n for n in own if isinstance(n, ast.ClassDef)}
    out: list[ast.stmt] = []
    for node in given:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = _fill(node, own_defs.get(node.name))
        elif isinstance(node, ast.ClassDef) and node.name in own_classes:
            node.body = _fill_body(node.body, own_classes[node.name].body)
        out.append(node)
    names = {n.name for n in given if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    helpers = [n for n in own if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name not in names]
    return out + helpers  # the student's own helpers (split_heads, _attend, ...) after the given code


def filled(student: str, starter: dict[str, str] = COURSE_STARTER) -> dict[str, str]:
    """The course's starter as `student` would hand it in: every stub filled with their code."""
    own = corpus_files(student)
    out = {}
    for name, text in starter.items():
        tree = ast.parse(text)
        tree.body = _fill_body(tree.body, ast.parse(own[name]).body)
        out[name] = ast.unparse(tree) + "\n"
    return out


def barely_touched(starter: dict[str, str] = COURSE_STARTER) -> dict[str, str]:
    """The starter with one method filled in (the one-line MLP.forward), nothing else."""
    text = starter["model_solution.py"].replace(
        '        """fc1, GELU, fc2."""\n        # YOUR CODE HERE\n        pass\n',
        '        """fc1, GELU, fc2."""\n        return self.fc2(self.gelu(self.fc1(x)))\n',
    )
    assert text != starter["model_solution.py"]
    return dict(starter, **{"model_solution.py": text})


# --- disguises ---------------------------------------------------------------------------------

_WORDS = ("val", "tmp", "res", "acc", "cur", "buf", "out", "data", "item", "node", "elem", "part")


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node


def rename(text: str, rng: random.Random) -> str:
    """Local names, parameters and the module's own functions renamed; never `self`, an
    attribute, a keyword argument's name or a method (other code calls those by name)."""
    tree = ast.parse(text)
    keywords = {k.arg for k in ast.walk(tree) if isinstance(k, ast.keyword)}
    found = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("__")}
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        found |= {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        found |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    found -= keywords | {"self", "cls", "__name__"}
    names = {n: f"{rng.choice(_WORDS)}_{i}" for i, n in enumerate(sorted(found))}
    return ast.unparse(_Rename(names).visit(tree)) + "\n"


def _shuffled(body: list[ast.stmt], rng: random.Random) -> list[ast.stmt]:
    defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    order = defs[:]
    rng.shuffle(order)
    moved = iter(order)
    return [next(moved) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else n for n in body]


def reorder(text: str, rng: random.Random) -> str:
    """Functions and methods in another order (classes where they were: a subclass needs its base)."""
    tree = ast.parse(text)
    tree.body = _shuffled(tree.body, rng)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        cls.body = _shuffled(cls.body, rng)
    return ast.unparse(tree) + "\n"


def reformat(text: str, rng: random.Random) -> str:
    """Another layout: ast.unparse (quotes, wrapping, parentheses), two-space indentation, a blank
    line after every block opener."""
    out = []
    for line in ast.unparse(ast.parse(text)).splitlines():
        stripped = line.lstrip(" ")
        depth = (len(line) - len(stripped)) // 4
        out.append("  " * depth + stripped)
        if stripped.endswith(":") and rng.random() < 0.5:
            out.append("")
    return "\n".join(out) + "\n"


def _without_comments(text: str) -> str:
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type != tokenize.COMMENT]
    return tokenize.untokenize(tokens)


class _Docstrings(ast.NodeTransformer):
    def __init__(self, rng: random.Random, remove: bool):
        self.rng, self.remove = rng, remove

    def _body(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", [])
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if self.remove and len(body) > 1:
                node.body = body[1:]  # type: ignore[attr-defined]
            else:
                body[0].value.value = self.rng.choice(("My implementation.", "Written for the assignment.", "Helper."))
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_ClassDef = visit_Module = _body


def comments(text: str, rng: random.Random) -> str:
    """Every comment gone; docstrings replaced or removed; new comments above some lines."""
    remove = rng.random() < 0.5
    tree = _Docstrings(rng, remove).visit(ast.parse(_without_comments(text)))
    out = []
    for line in ast.unparse(tree).splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        if not remove and line.strip() and rng.random() < 0.15:
            out.append(f"{indent}# {rng.choice(('step', 'see lecture 7', 'careful with shapes', 'works'))}")
        out.append(line)
    return "\n".join(out) + "\n"


_DEAD = [
    "_debug = False",
    "if _debug:\n    print('shape check')",
    "_unused = [i * 2 for i in range(3)]",
    "assert True",
]


def dead_code(text: str, rng: random.Random) -> str:
    """Unused statements at the top of most functions, and an unused helper at the end."""
    tree = ast.parse(text)
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        if rng.random() < 0.7:
            at = 1 if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else 0
            fn.body[at:at] = ast.parse(rng.choice(_DEAD)).body
    helper = (
        "def _check_shapes(a, b):\n    if a is None or b is None:\n        return False\n"
        "    return tuple(a) == tuple(b)\n"
    )
    tree.body.extend(ast.parse(helper).body)
    return ast.unparse(tree) + "\n"


class _WhileLoops(ast.NodeTransformer):
    """`for i in range(n): body` to `i = 0; while i < n: body; i += 1` (for bodies without a
    `continue`, which would skip the increment)."""

    def __init__(self) -> None:
        self.count = 0

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        simple = (
            isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range"
        )
        if not simple or not isinstance(node.target, ast.Name) or node.orelse:
            return node
        if any(isinstance(n, ast.Continue) for n in ast.walk(node)) or len(node.iter.args) != 1:  # type: ignore[attr-defined]
            return node
        self.count += 1
        name = node.target.id if node.target.id != "_" else f"_k{self.count}"
        limit = ast.unparse(node.iter.args[0])  # type: ignore[attr-defined]
        body = textwrap.indent("\n".join(ast.unparse(s) for s in node.body), "    ")
        return ast.parse(f"{name} = 0\nwhile {name} < {limit}:\n{body}\n    {name} += 1\n").body


def loop(text: str, rng: random.Random) -> str:
    return ast.unparse(_WhileLoops().visit(ast.parse(text))) + "\n"


def _alternate(a: list[ast.stmt], b: list[ast.stmt], turn: list[bool]) -> list[ast.stmt]:
    """`a`'s statements, each function (method or not) that `b` has too taken from one or the
    other in turn, classes gone through the same way."""
    other = {n.name: n for n in b if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    out: list[ast.stmt] = []
    for node in a:
        twin = other.get(node.name) if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else None
        if isinstance(node, ast.ClassDef) and isinstance(twin, ast.ClassDef):
            node.body = _alternate(node.body, twin.body, turn)
        elif isinstance(node, ast.FunctionDef) and twin is not None:
            turn[0] = not turn[0]
            node = twin if turn[0] else node
        out.append(node)
    return out


def splice(a: dict[str, str], b: dict[str, str], rng: random.Random) -> dict[str, str]:
    """Two sources in one: every function and method of every file taken from one or the other
    in turn, so that each gives about half its work."""
    out = {}
    turn = [rng.random() < 0.5]
    for name in a:
        ta = ast.parse(a[name])
        ta.body = _alternate(ta.body, ast.parse(b[name]).body, turn)
        out[name] = ast.unparse(ta) + "\n"
    return out


DISGUISES = {
    "rename": rename,
    "reorder": reorder,
    "reformat": reformat,
    "comments": comments,
    "dead_code": dead_code,
    "loop": loop,
}


def disguised(files: dict[str, str], how: str, seed: int) -> dict[str, str]:
    """A copy of a submission's files under one disguise, or "all" of them in turn."""
    rng = random.Random(seed)
    steps = list(DISGUISES) if how == "all" else [how]
    out = dict(files)
    for step in steps:
        out = {name: DISGUISES[step](text, rng) for name, text in out.items()}
    for text in out.values():
        ast.parse(text)  # still Python
    return out
