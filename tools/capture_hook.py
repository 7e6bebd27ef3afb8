"""capture_hook.py — save the activations of a real serving stack for `nvfp4dbg trace --prod-dump`.

Registers PyTorch forward hooks on the linear modules of a transformers or vLLM model and writes,
for every hooked module, the output and the input of the first call (the prefill over your
prompt) into one safetensors file in nvfp4dbg's naming (docs/repro.md, "Captured activations"):

    <name>          the module's output  [tokens, out_features]   float32
    <name>.input    the module's input   [tokens, in_features]    float32

<name> is the module path as the model names it ("model.layers.0.self_attn.q_a_proj"); nvfp4dbg
looks a capture up by stage name and then by module name, so module paths work as they are. Run
the model on the SAME token ids you give `nvfp4dbg trace --tokens` (one sequence, no padding,
no batching), then:

    nvfp4dbg trace CKPT --tokens 1,2,3 --prod-dump captured.safetensors

transformers:

    from capture_hook import Capture
    cap = Capture(model, match=("q_a_proj", "kv_proj", "q_b_proj", "o_b_proj", "experts"))
    model(torch.tensor([ids]))
    cap.save("captured.safetensors")

vLLM (one GPU, eager mode so hooks run; enforce_eager=True): hook the model the worker holds,
e.g. `llm.llm_engine.model_executor.driver_worker.model_runner.model` (the attribute path
depends on the vLLM version), and split fused modules yourself if you want per-shard tensors:
vLLM's `fused_qkv_a_proj` / `qkv_proj` output is the concatenation of the shards (give it the
name of the first shard's stage only if the stage's output is the fused one).

Only the first call of each module is kept (a decode step would overwrite the prefill).
Requires torch and safetensors; nvfp4dbg itself never needs Python.
"""
import torch
from safetensors.torch import save_file


class Capture:
    def __init__(self, model, match=None, rename=None):
        """match: substrings of module paths to hook (None: every torch.nn.Linear and every module
        whose class name ends in 'Linear'); rename: optional function path -> saved name."""
        self.tensors = {}
        self.handles = []
        for path, mod in model.named_modules():
            linear = isinstance(mod, torch.nn.Linear) or type(mod).__name__.endswith("Linear")
            if match is None and not linear:
                continue
            if match is not None and not any(m in path for m in match):
                continue
            name = rename(path) if rename else path
            self.handles.append(mod.register_forward_hook(self._hook(name)))

    def _hook(self, name):
        def hook(module, args, output):
            if name in self.tensors:
                return
            x = args[0] if args else None
            y = output[0] if isinstance(output, tuple) else output
            if not torch.is_tensor(y) or not torch.is_tensor(x):
                return
            # [batch, tokens, features] -> [tokens, features]: one sequence
            self.tensors[name] = y.detach().float().reshape(-1, y.shape[-1]).cpu().contiguous()
            self.tensors[name + ".input"] = x.detach().float().reshape(-1, x.shape[-1]).cpu().contiguous()
        return hook

    def save(self, path):
        for h in self.handles:
            h.remove()
        save_file(self.tensors, path, metadata={"producer": "nvfp4dbg tools/capture_hook.py"})
        return len(self.tensors)
