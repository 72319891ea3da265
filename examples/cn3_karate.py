"""Node classification on Zachary's karate club with two CN3 layers (:class:`cn3.nn.CN3Conv`).

The club's 34 members split into 4 communities; one labelled member per community is all the model
trains on, and it labels the other 30 from the graph. The dataset ships inside PyTorch Geometric
(no download). Run ``python examples/cn3_karate.py``; it prints the loss every 50 epochs and the
accuracy on the 30 members it never saw labelled.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch_geometric.datasets import KarateClub

from cn3.nn import CN3Conv


class KarateCN3(torch.nn.Module):
    """Two CN3 layers: ``in -> hidden`` (2 heads, concatenated) and ``-> classes`` (one head)."""

    def __init__(self, in_channels: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.conv1 = CN3Conv(in_channels, hidden, heads=2)
        self.conv2 = CN3Conv(2 * hidden, classes, heads=1)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.elu(self.conv1(x, edge_index))  # (N, 2 * hidden)
        return self.conv2(x, edge_index)  # (N, classes) logits


def train(epochs: int = 200, seed: int = 0, verbose: bool = True) -> float:
    """Train with a fixed seed; returns the accuracy on the nodes outside the training mask."""
    torch.manual_seed(seed)
    data = KarateClub()[0]
    model = KarateCN3(data.num_features, 8, int(data.y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for epoch in range(1, epochs + 1):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
        if verbose and epoch % 50 == 0:
            print(f"epoch {epoch:3d}  loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        predicted = model(data.x, data.edge_index).argmax(dim=-1)
    unseen = ~data.train_mask
    accuracy = (predicted[unseen] == data.y[unseen]).float().mean().item()
    if verbose:
        print(f"accuracy on the {int(unseen.sum())} unlabelled members: {accuracy:.3f}")
    return accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train(args.epochs, args.seed)
