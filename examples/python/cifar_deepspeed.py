"""A DeepSpeed training script shaped like DeepSpeed's CIFAR-10 example (model, deepspeed.initialize,
training loop, checkpoint), run by xtrain with one changed line: `import xtrain as deepspeed`.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/cifar_deepspeed.py \
        --deepspeed_config examples/python/ds_config.json
    build/xtrain launch -N 2 -- examples/python/cifar_deepspeed.py --deepspeed_config examples/python/ds_config.json

The data are CIFAR-shaped (3x32x32 images, 10 classes) and synthetic, so the script runs anywhere:
each class is a colour pattern plus noise, which the network learns in a few hundred steps.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import xtrain as deepspeed  # the one changed line: `import deepspeed` in DeepSpeed's example


def add_argument():
    parser = argparse.ArgumentParser(description="CIFAR-shaped training with xtrain")
    parser.add_argument("-e", "--epochs", default=2, type=int, help="number of total epochs")
    parser.add_argument("--samples", default=512, type=int, help="synthetic training images")
    parser.add_argument("--checkpoint-dir", default="runs/cifar_deepspeed", help="where save_checkpoint writes")
    parser.add_argument("--local_rank", type=int, default=-1, help="local rank passed from distributed launcher")
    parser = deepspeed.add_config_arguments(parser)
    return parser.parse_args()


class SyntheticCIFAR(torch.utils.data.Dataset):
    """Images whose class sets the mean of each colour channel in one of 10 patterns."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        patterns = torch.rand(10, 3, 1, 1, generator=g) * 2 - 1
        self.images = patterns[self.labels] + 0.5 * torch.randn(n, 3, 32, 32, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    args = add_argument()
    deepspeed.init_distributed()
    torch.manual_seed(0)
    net = Net()
    parameters = filter(lambda p: p.requires_grad, net.parameters())
    model_engine, optimizer, trainloader, _ = deepspeed.initialize(
        args=args, model=net, model_parameters=parameters, training_data=SyntheticCIFAR(args.samples))
    criterion = nn.CrossEntropyLoss()
    first = last = None
    for epoch in range(args.epochs):
        trainloader.sampler.set_epoch(epoch)
        running, count = 0.0, 0
        for inputs, labels in trainloader:
            outputs = model_engine(inputs)
            loss = criterion(outputs.float(), labels)
            model_engine.backward(loss)
            model_engine.step()
            running, count = running + loss.item(), count + 1
        last = running / max(count, 1)
        first = last if first is None else first
        if model_engine.global_rank == 0:
            print(f"epoch {epoch + 1}: loss {last:.4f}, step {model_engine.global_steps}, "
                  f"lr {model_engine.get_lr()[0]:.2e}", flush=True)
    model_engine.save_checkpoint(args.checkpoint_dir, client_state={"epoch": args.epochs})
    _, client_state = model_engine.load_checkpoint(args.checkpoint_dir)
    if model_engine.global_rank == 0:
        print(f"saved to {args.checkpoint_dir} (client_state {client_state}); loss {first:.4f} -> {last:.4f}")


if __name__ == "__main__":
    main()
