"""Exact enumeration of an autoregressive model's support, for small systems.

Walks the tree of prefixes breadth first with the uncached ``conditionals`` and keeps every
child of nonzero probability, so it needs no knowledge of the constraint: the model's masks
define the valid space.
"""

from __future__ import annotations

import torch

from samplers.protocol import AutoregressiveModel


@torch.no_grad()
def enumerate_support(model: AutoregressiveModel, max_configurations: int = 1_000_000) -> tuple[torch.Tensor, torch.Tensor]:
    """Every configuration with ``p(x) > 0`` and its probability.

    Returns:
        ``(tokens [D, N] int64, probabilities [D] float64)``, probabilities summing to 1.

    Raises:
        ValueError: if the support grows past ``max_configurations``.
    """
    device = model.device
    prefix = torch.zeros(1, 0, dtype=torch.long, device=device)
    log_p = torch.zeros(1, dtype=torch.float64, device=device)
    for _ in range(model.n_orbitals):
        placeholder = prefix.new_zeros(prefix.shape[0], 1)
        probs = model.conditionals(torch.cat((prefix, placeholder), dim=1))[:, -1].to(torch.float64)
        parent, token = (probs > 0).nonzero(as_tuple=True)
        if parent.numel() > max_configurations:
            raise ValueError(
                f"the valid space has more than {max_configurations} configurations; "
                "exact enumeration is for small systems"
            )
        log_p = log_p[parent] + probs[parent, token].log()
        prefix = torch.cat((prefix[parent], token[:, None]), dim=1)
    return prefix, log_p.exp()
