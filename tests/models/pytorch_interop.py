"""Python's side of pytorch_interop_test.sh (run with Debian's /usr/bin/python3).

Each subcommand exits non-zero with a message when its check fails:
  input OUT                    writes {"input": a fixed [2, 3, 32, 32] tensor} to OUT
  torchvision_init OUT SEED    writes torch.save(resnet50(num_classes=10).state_dict())
  compare_output MODEL IN OUT  torchvision's resnet50 with MODEL (strict), eval mode, on IN's
                               input equals OUT's output (p3's) within 1e-5; BatchNorm
                               buffers are trained ones (num_batches_tracked > 0)
  same_state A B [TOL [params]] same names in the same order, dtypes, shapes, and values
                               (exactly, or within TOL; "params": BatchNorm buffers' values
                               not compared)
  different_state A B          some floating-point value differs
  names MODEL LISTING          torchvision's MODEL(num_classes=10) state_dict has exactly the
                               names, shapes and dtypes of LISTING (state_dict_tool --list)
  listing_matches FILE LISTING a state dict file has exactly LISTING's names and shapes
"""
import sys

import torch
import torchvision

DTYPES = {"Float": torch.float32, "Long": torch.int64, "Double": torch.float64}


def fail(message):
    print("FAILED:", message)
    sys.exit(1)


def read_listing(path):
    entries = []
    with open(path) as f:
        for line in f:
            name, shape, dtype = line.rstrip("\n").split("\t")
            dims = tuple(int(d) for d in shape.split(",")) if shape else ()
            entries.append((name, dims, DTYPES[dtype]))
    return entries


def main(argv):
    cmd = argv[1]
    if cmd == "input":
        g = torch.Generator().manual_seed(11)
        torch.save({"input": torch.randn(2, 3, 32, 32, generator=g)}, argv[2])
    elif cmd == "torchvision_init":
        torch.manual_seed(int(argv[3]))
        torch.save(torchvision.models.resnet50(num_classes=10).state_dict(), argv[2])
    elif cmd == "compare_output":
        state = torch.load(argv[2])
        model = torchvision.models.resnet50(num_classes=10)
        model.load_state_dict(state, strict=True)  # raises on any name or shape mismatch
        if state["bn1.num_batches_tracked"].item() <= 0:
            fail("bn1.num_batches_tracked is %s: the buffers were not trained"
                 % state["bn1.num_batches_tracked"].item())
        if torch.equal(state["bn1.running_mean"], torch.zeros(64)):
            fail("bn1.running_mean is all zero: the buffers were not trained")
        model.eval()
        x = torch.load(argv[3])["input"]
        p3_out = torch.load(argv[4])["output"]
        with torch.no_grad():
            out = model(x)
        diff = (out - p3_out).abs().max().item()
        print("max |torchvision - p3| = %.3g (output magnitude %.3g)" % (diff, out.abs().max().item()))
        if out.shape != p3_out.shape or not diff <= 1e-5:
            fail("outputs differ by %g" % diff)
    elif cmd == "same_state":
        a, b = torch.load(argv[2]), torch.load(argv[3])
        tol = float(argv[4]) if len(argv) > 4 else 0.0
        params_only = len(argv) > 5 and argv[5] == "params"
        buffer_suffixes = ("running_mean", "running_var", "num_batches_tracked")
        if list(a) != list(b):
            fail("names differ: %s" % sorted(set(a) ^ set(b))[:5])
        for k in a:
            if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape:
                fail("%s: %s %s vs %s %s" % (k, a[k].dtype, tuple(a[k].shape), b[k].dtype,
                                             tuple(b[k].shape)))
            if params_only and k.endswith(buffer_suffixes):
                continue
            if tol == 0 and not torch.equal(a[k], b[k]):
                fail("%s: values differ" % k)
            if tol > 0 and a[k].is_floating_point() and not torch.allclose(a[k], b[k], rtol=0, atol=tol):
                fail("%s: values differ by %g" % (k, (a[k] - b[k]).abs().max().item()))
        print("%d entries equal" % len(a))
    elif cmd == "different_state":
        a, b = torch.load(argv[2]), torch.load(argv[3])
        if all(torch.equal(a[k], b[k]) for k in a if a[k].is_floating_point()):
            fail("the two state dicts are equal")
    elif cmd == "names":
        name = argv[2]
        kwargs = {"aux_logits": True, "init_weights": False} if name == "inception_v3" else {}
        model = getattr(torchvision.models, name)(num_classes=10, **kwargs)
        expected = [(k, tuple(v.shape), v.dtype) for k, v in model.state_dict().items()]
        got = read_listing(argv[3])
        if sorted(expected) != sorted(got):
            missing = sorted(set(expected) - set(got))[:3]
            extra = sorted(set(got) - set(expected))[:3]
            fail("%s: torchvision only %s; p3 only %s" % (name, missing, extra))
        print("%s: %d entries match torchvision's" % (name, len(got)))
    elif cmd == "listing_matches":
        state = torch.load(argv[2])
        got = [(k, tuple(v.shape), v.dtype) for k, v in state.items()]
        if got != read_listing(argv[3]):
            fail("the file's entries are not the model's")
        print("%d entries" % len(got))
    else:
        fail("unknown subcommand " + cmd)


if __name__ == "__main__":
    main(sys.argv)
