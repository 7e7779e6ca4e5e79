"""p3: train a PyTorch module on a P3 parameter-server cluster (docs/python.md).

    import p3
    p3.init()                      # rank, servers, config: the launcher's P3_* environment
    model = p3.distribute(model)   # or: optimizer = p3.DistributedOptimizer(optimizer, model)
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()            # gradients leave slice by slice, highest priority first
        model.step()               # ends the iteration; values arrive, gating per block
    model.finish()

Everything that moves values (slicing, priorities, credit, the modes, the protocol) is the
C++ worker's (worker/worker.h), reached through the extension p3._p3; this layer only
finds the module's blocks and hooks them: a forward pre-hook per block waits for that
block's parameters, and tensor hooks registered in C++ on the same parameter tensors take
each gradient as autograd produces it. The optimizer runs on the servers (the config's).
"""

import json
import math
import os
import statistics
import time

import torch

from . import _p3

__all__ = ["Error", "Context", "init", "distribute", "derive_blocks", "DistributedModel",
           "DistributedOptimizer"]

# A C++ Status raised in Python: a RuntimeError whose message is the Status's.
Error = _p3.Error

_ENV = ("P3_RANK", "P3_WORLD_SIZE", "P3_SERVERS", "P3_CONFIG", "P3_RESULT_FILE",
        "P3_RECORDS_FILE", "P3_TRACE_FILE", "P3_REJOIN", "P3_RUN_DIR")


class Context:
    """Where this worker belongs: its rank, the servers, the config. Made by init()."""

    def __init__(self, rank, world_size, servers, config, overrides, rejoin, trace_file,
                 result_file, run_dir):
        self.rank = rank
        self.world_size = world_size
        self.servers = servers
        self.config = config
        self.overrides = list(overrides)
        self.rejoin = rejoin
        self.trace_file = trace_file
        self.result_file = result_file
        self.run_dir = run_dir

    def __repr__(self):
        return ("p3.Context(rank={}, world_size={}, servers={}, config={!r})"
                .format(self.rank, self.world_size, self.servers, self.config))


_context = None


def init(rank=None, world_size=None, servers=None, config=None, overrides=(), rejoin=None,
         trace_file=None, result_file=None):
    """Reads this worker's place in the cluster; returns the Context, also kept as the default.

    Each argument left None comes from the environment launch_cluster sets (docs/python.md):
    P3_RANK, P3_WORLD_SIZE, P3_SERVERS (host:port,...), P3_CONFIG (the run's config file),
    P3_REJOIN ("1": this process replaces a dead worker), P3_TRACE_FILE, P3_RESULT_FILE.
    `overrides` are the config's dotted-path overrides, e.g. ["optimizer.lr=0.1"].
    """
    env = os.environ

    def need(value, name, convert):
        if value is not None:
            return value
        if not env.get(name):
            raise Error("p3.init: {} is not set and no {} was given".format(
                name, name[3:].lower()))
        try:
            return convert(env[name])
        except ValueError:
            raise Error("p3.init: {}={!r} is not valid".format(name, env[name])) from None

    rank = need(rank, "P3_RANK", int)
    world_size = need(world_size, "P3_WORLD_SIZE", int)
    servers = need(servers, "P3_SERVERS", lambda s: [a for a in s.split(",") if a])
    if isinstance(servers, str):
        servers = [a for a in servers.split(",") if a]
    config = need(config, "P3_CONFIG", str)
    if rejoin is None:
        rejoin = env.get("P3_REJOIN", "0") == "1"
    if trace_file is None:
        trace_file = env.get("P3_TRACE_FILE", "")
    if result_file is None:
        result_file = env.get("P3_RESULT_FILE", "")
    if not 0 <= rank < world_size:
        raise Error("p3.init: rank {} is out of range for {} workers".format(rank, world_size))
    global _context
    _context = Context(rank, world_size, list(servers), config, overrides, bool(rejoin),
                       trace_file, result_file, env.get("P3_RUN_DIR", ""))
    return _context


def _trainable(params):
    return [(n, p) for n, p in params if p.requires_grad]


def derive_blocks(model, blocks=None):
    """The blocks of `model` as (name, module, [(parameter name, parameter)]), forward order.

    Without `blocks`: the model's own parameters (if any, as block "_root"), then each
    top-level child that owns trainable parameters, in registration order — which is
    assumed to be the forward order (it sets the priorities: earlier blocks first). A
    parameter shared by several children belongs to the first. With `blocks`: those
    modules (or (name, module) pairs) in that order; every trainable parameter of the
    model must be in one. Frozen parameters (requires_grad=False) are not synchronised.
    """
    seen = set()
    out = []

    def add(name, module, named):
        mine = [(n, p) for n, p in _trainable(named) if id(p) not in seen]
        seen.update(id(p) for _, p in mine)
        if mine:
            out.append((name, module, mine))

    if blocks is None:
        add("_root", model, model.named_parameters(recurse=False))
        for name, child in model.named_children():
            add(name, child, [(name + "." + n, p) for n, p in child.named_parameters()])
        return out
    names = {id(m): n for n, m in model.named_modules()}
    for b in blocks:
        name, module = b if isinstance(b, tuple) else (names.get(id(b)), b)
        if id(module) not in names:
            raise Error("p3: block {!r} is not a submodule of the model".format(name or module))
        prefix = names[id(module)]
        add(name, module, [((prefix + "." if prefix else "") + n, p)
                           for n, p in module.named_parameters()])
    left = [n for n, p in _trainable(model.named_parameters()) if id(p) not in seen]
    if left:
        raise Error("p3: parameter {} is in no block; every trainable parameter must be in "
                    "one".format(left[0]))
    return out


def _layout(model):
    """What must not change after distribute(): each trainable parameter and its memory."""
    return [(n, id(p), p.data_ptr(), tuple(p.shape))
            for n, p in _trainable(model.named_parameters())]


class DistributedModel(torch.nn.Module):
    """The module, trained on the cluster: call it as the module; step() after backward().

    Not thread-safe: one training thread, as with the module itself.
    """

    def __init__(self, module, blocks=None, context=None):
        super().__init__()
        context = context or _context
        if context is None:
            raise Error("p3.distribute: call p3.init() first")
        self.module = module
        self._context = context
        self._blocks = derive_blocks(module, blocks)
        if not self._blocks:
            raise Error("p3.distribute: the model has no trainable parameter")
        buffers = list(module.named_buffers())
        self._worker = _p3.Worker(
            config=context.config, overrides=context.overrides, rank=context.rank,
            world_size=context.world_size, servers=context.servers, rejoin=context.rejoin,
            trace_file=context.trace_file,
            blocks=[(name, [n for n, _ in ps], [p for _, p in ps])
                    for name, _, ps in self._blocks],
            buffers=[b for _, b in buffers], buffer_names=[n for n, _ in buffers])
        self._layout = _layout(module)
        self._finished = False
        self._started = time.monotonic()
        self._last_step = None
        self._step_seconds = []  # from one step() to the next
        self._batch = None       # the first input's first dimension, for samples/s
        self._hooks = [module.register_forward_pre_hook(self._check_unchanged)]
        for i, (_, block_module, _) in enumerate(self._blocks):
            self._hooks.append(block_module.register_forward_pre_hook(self._gate(i)))
        self._hooks.append(module.register_forward_hook(self._arm))

    def _gate(self, i):
        def wait(module, inputs):
            self._worker.wait_for_block(i)  # this block's slices, not the others'
        return wait

    def _check_unchanged(self, module=None, inputs=None):
        if self._batch is None and inputs and torch.is_tensor(inputs[0]) and inputs[0].dim():
            self._batch = inputs[0].shape[0]
        if self._finished:
            raise Error("p3: the model was finished (finish()); distribute it again")
        layout = _layout(self.module)
        if layout != self._layout:
            before = {n: (i, d, s) for n, i, d, s in self._layout}
            after = {n: (i, d, s) for n, i, d, s in layout}
            changed = sorted(set(before) ^ set(after)) or \
                [n for n in after if after[n] != before[n]]
            raise Error("p3: the model changed after p3.distribute (parameter {} was added, "
                        "removed or replaced); distribute the final model".format(changed[0]))

    def _arm(self, module, inputs, output):
        # The backward pass that may follow feeds the gradient hooks.
        if torch.is_grad_enabled():
            self._worker.arm_gradients()

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def step(self):
        """Ends the iteration: every parameter must have its gradient (loss.backward())."""
        self._check_unchanged()
        try:
            self._worker.end_iteration()
        except Error as e:
            if "has no gradient yet" not in str(e):
                raise
            raise Error(str(e) + ": call loss.backward() before step()") from None
        now = time.monotonic()
        if self._last_step is not None:
            self._step_seconds.append(now - self._last_step)
        self._last_step = now

    def sync(self):
        """Waits until every parameter holds the current iteration's values."""
        self._worker.sync()

    def average_buffers(self):
        """Every worker's float32 buffers (BatchNorm's statistics) become their mean.

        Collective: every worker calls it at the same iteration, at most once per iteration.
        """
        self._worker.average_buffers()

    def finish(self, final_loss=None, test_accuracy=None):
        """Waits for the final values, leaves the cluster, writes P3_RESULT_FILE if set.

        `final_loss` and `test_accuracy`, if the script gives them, go into the result
        (launch_cluster's summary shows them); they are null otherwise.
        """
        if self._finished:
            return
        self._worker.finish()
        self._finished = True
        for h in self._hooks:
            h.remove()
        if self._context.result_file:
            self._write_result(final_loss, test_accuracy)

    @property
    def iteration(self):
        """Completed iterations (a rejoined worker starts at the cluster's)."""
        return self._worker.iteration

    @property
    def mode(self):
        return self._worker.mode

    @property
    def block_names(self):
        return [name for name, _, _ in self._blocks]

    def stats(self):
        """bytes_sent, bytes_received, bytes_shared, forward_wait_seconds so far."""
        return self._worker.stats()

    def _write_result(self, final_loss, test_accuracy):
        # p3_worker's --result_file keys (launch_cluster requires them); samples/s: the whole
        # cluster's samples over the median time from one step() to the next.
        with torch.no_grad():
            l2 = math.sqrt(sum(float(p.double().pow(2).sum()) for p in self.module.parameters()))
        rate = None
        if self._step_seconds and self._batch:
            rate = self._batch * self._context.world_size / statistics.median(self._step_seconds)
        result = dict(rank=self._context.rank, iterations=self.iteration,
                      samples_per_second=rate, final_loss=final_loss,
                      test_accuracy=test_accuracy, param_l2=l2,
                      wall_seconds=time.monotonic() - self._started, program="python")
        result.update(self.stats())
        with open(self._context.result_file, "w") as f:
            f.write(json.dumps(result) + "\n")


def distribute(model, blocks=None, context=None):
    """Joins the cluster with `model` (rank 0's values become everyone's); returns it wrapped.

    `blocks`: see derive_blocks. `context`: a Context from init(); default: the last one.
    """
    return DistributedModel(model, blocks, context)


class DistributedOptimizer:
    """The Horovod/BytePS style: optimizer.step() ends the iteration on the cluster.

    `optimizer` is kept for its param_groups only: the servers update the parameters with
    the config's optimizer (optimizer.*), not this one's settings. `model` is hooked in
    place: keep calling it directly.
    """

    def __init__(self, optimizer, model, blocks=None, context=None):
        self.optimizer = optimizer
        self.model = distribute(model, blocks, context)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none=True):
        # The worker's hooks take each gradient and clear .grad: nothing accumulates.
        pass

    def step(self, closure=None):
        if closure is not None:
            with torch.enable_grad():
                closure()
        self.model.step()

    def finish(self, final_loss=None, test_accuracy=None):
        self.model.finish(final_loss, test_accuracy)
