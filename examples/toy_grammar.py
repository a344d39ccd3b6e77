"""The examples' training data: token sequences from a small random grammar (each token may be followed
by three others, with fixed odds), so that a model's loss has somewhere to fall and every rank can make
the same global batch from the step number alone."""
import torch

FOLLOWER_PROBS = torch.tensor([0.6, 0.3, 0.1])


def grammar(vocab, seed):
    """followers[t]: the three tokens that may follow token t."""
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(vocab, generator=gen)[:3] for _ in range(vocab)])


def make_batch(followers, batch, seq_len, step, seed):
    """The step's global batch, the same on every rank: (inputs, targets), targets shifted by one."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    tokens = torch.empty(batch, seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, followers.shape[0], (batch,), generator=gen)
    for i in range(seq_len):
        choice = torch.multinomial(FOLLOWER_PROBS, batch, replacement=True, generator=gen)
        tokens[:, i + 1] = followers[tokens[:, i], choice]
    return tokens[:, :-1], tokens[:, 1:]
