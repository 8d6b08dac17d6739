Sure! Here is an optimized version of the model. ReLU is memory-bound, so
the best we can do is a single pass over the tensor:

```python
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.maximum(x, torch.zeros_like(x))
```

This keeps the same interface as `Model` (no init arguments) and returns a
tensor of the same shape and dtype as the input.
