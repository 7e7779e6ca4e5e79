"""The benchmarked models' sizes, and the throughput a link allows them at best."""

# torchvision / the p3 zoo, 1000 classes (docs/models.md).
PARAMS = {"resnet50": 25557032, "vgg19": 143667240, "vgg16": 138357544,
          "seq2seq_lstm": 58114816, "transformer": 76938496, "inception_v3": 27161264}
# Models whose inputs are tokens (data.dataset synthetic_tokens, model.seq_len).
TOKEN_MODELS = ("seq2seq_lstm", "transformer")
# The payload share of a tbf-shaped link (docs/network.md).
TCP_GOODPUT = 0.957


def bandwidth_bound(model, bw, batch, workers=2, bytes_per_value=4):
    """Samples/s if each machine's link carried its bytes at the TCP goodput and nothing
    else took time; inf without a link limit (bw <= 0). With 2 machines (a colocated
    worker + server each), machine 0's upload carries worker 0's pushes of the slices
    server 1 owns AND server 0's replies to worker 1 for the slices server 0 owns: all P
    parameters per iteration, each direction, whatever the slice assignment. DDP's ring
    all-reduce with 2 ranks sends the same P. bytes_per_value=2: a 16-bit wire
    (scheduling.wire_dtype)."""
    if bw <= 0:
        return float("inf")
    seconds = PARAMS[model] * bytes_per_value * 8 / (bw * 1e9 * TCP_GOODPUT)
    return batch * workers / seconds
