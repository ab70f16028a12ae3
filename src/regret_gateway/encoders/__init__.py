"""The encoders: how a request's text becomes the vector the router reads.

``embedder`` (:class:`~regret_gateway.encoders.embedder.Embedder`: the one entry point, built from the
settings) serves one of them: the static encoder (``static``: one vector per token and their mean, numpy and
``tokenizers`` only), distilled from the bundled MiniLM by ``distill``; or MiniLM's forward pass, on ONNX
Runtime (``onnx_runtime``) or as a TorchScript trace (``torchscript``). ``exported`` is the published
folder of the ONNX encoder, served without torch or transformers. Nothing heavy is imported here.
"""
