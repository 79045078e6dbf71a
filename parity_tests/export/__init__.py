"""Tests: safetensors / ONNX export and the exported driver."""
