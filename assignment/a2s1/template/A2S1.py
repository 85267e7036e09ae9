# %% [markdown]
# # A2S1 — Understanding attention
# Attention here is softmax(q·kᵀ)·v with no scaling. Fill in each TODO.

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

# %%
# TODO: a query (1x3) whose output is value[0]
query121 = None

# %%
# TODO: a 4x3 query whose output is value
query122 = None

# %% [markdown]
# ## 1.3 Averaging

# %%
# TODO: a query whose output is the mean of all four values
query131 = None

# %%
# TODO: a query whose output is the mean of value[0] and value[1]
query132 = None

# %% [markdown]
# Keeping query132 fixed, replace only row 2 of the key (the cells below both define m_key).

# %%
# TODO: m_key such that the output is the mean of value[0], value[1] and value[2]
m_key = None

# %%
# TODO: m_key such that the output is value[2]
m_key = None

# %%
import matplotlib.pyplot as plt

# plot the attention weights of your queries here
