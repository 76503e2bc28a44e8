"""Import from PyTorch (``torch.export``), fusion of real layers, task dedup, numerics vs torch."""

import numpy as np
import pytest

import workbench as wb

torch = pytest.importorskip(
    "torch", reason="PyTorch is the optional extra 'torch' (pip install torch==2.13.0)"
)
nn = torch.nn
zoo = pytest.importorskip("workbench.graph.zoo")


def run_both(module, example):
    graph = wb.from_torch(module, example)
    model = wb.build_model(graph, target="llvm")
    outs = model(*(t.numpy() for t in example))
    with torch.no_grad():
        ref = module(*example)
    return graph, model, outs[0], ref.numpy()


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, groups=8, bias=False)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = self.pool(torch.sigmoid(self.dw(y)))
        return self.fc(torch.flatten(self.avg(y), 1))


def test_tiny_cnn_fuses_and_matches_torch():
    torch.manual_seed(0)
    m = TinyCNN().eval()
    m.bn.running_mean.uniform_(-1, 1)
    m.bn.running_var.uniform_(0.5, 2)
    graph, model, out, ref = run_both(m, (torch.randn(1, 3, 16, 16),))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # the batch norm is folded into the convolution: conv + bias + relu is one group
    assert [g.name for g in graph.groups] == [
        "fused_conv2d_add_relu",
        "fused_conv2d_sigmoid",
        "fused_max_pool2d",
        "fused_adaptive_avg_pool2d",
        "fused_dense_add",
    ]
    assert not any(n.op == "multiply" for n in graph.nodes)
    # the convolution's weight (batch norm folded in) is stored output-channels-last, so its
    # default schedule vectorizes over them; the depthwise one's (grouped) stays OIHW
    conv, dw = (n for n in graph.nodes if n.op == "conv2d")
    assert conv.attrs["weight_layout"] == "IHWO" and graph.values[conv.inputs[1]][0] == (3, 3, 3, 8)
    assert "weight_layout" not in dw.attrs and graph.values[dw.inputs[1]][0] == (8, 1, 3, 3)
    assert graph.groups[0].nodes[0].where == "conv (Conv2d)"
    assert "groups=8" in str(graph)


def test_tiny_transformer_layer_fuses_and_matches_torch():
    m, example = zoo.get("bert_layer", hidden=32, heads=2, intermediate=64, seq=8)
    graph, model, out, ref = run_both(m, example)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    names = [g.name for g in graph.groups]
    assert "fused_dense_add_gelu" in names  # dense + bias + gelu
    assert names.count("fused_dense_add_add") == 2  # the residual adds join the projections
    assert names.count("fused_layer_norm") == 2 and "fused_softmax" in names
    weights = {t.name: t.weight for t in graph.task_list() if t.name == "fused_dense_add"}
    assert weights == {"fused_dense_add": 3}  # query, key and value are one task


def test_resnet18_blocks_share_tasks():
    m, example = zoo.get("resnet18", width=8, image=32, classes=10)
    graph = wb.from_torch(m, example)
    tasks = graph.task_list()
    assert len(graph.groups) == 23 and len(tasks) == 18
    assert sum(t.weight for t in tasks) == len(graph.groups)
    # layer1's two blocks are identical: each of their convolutions is one task of weight 2
    by_group = {k: t for t in tasks for k in t.groups}
    first_block = [g for g in graph.groups if g.nodes[0].where.startswith("layer1.0.")]
    assert [by_group[graph.groups.index(g)].weight for g in first_block] == [2, 2]
    # the residual add and relu are fused into the second convolution of a block
    assert first_block[1].name == "fused_conv2d_add_add_relu"


def test_mobilenet_v2_inverted_residual_matches_torch():
    torch.manual_seed(0)
    block = zoo._randomize_norms(zoo.InvertedResidual(8, 8, stride=1, expand=4))
    graph, model, out, ref = run_both(block, (torch.randn(1, 8, 8, 8),))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # expand (1x1 + relu6), depthwise (3x3, groups=32, + relu6), project (1x1) + residual add
    assert [g.name for g in graph.groups] == [
        "fused_conv2d_add_clip",
        "fused_conv2d_add_clip",
        "fused_conv2d_add_add",
    ]
    assert graph.groups[1].nodes[0].attrs["groups"] == 32


def test_mobilenet_v2_imports_with_depthwise_tasks():
    m, example = zoo.get("mobilenet_v2", width=0.25, image=32, classes=10, last_channel=32)
    graph = wb.from_torch(m, example)
    assert sum(t.weight for t in graph.task_list()) == len(graph.groups) == 54
    assert sum(n.op == "conv2d" and n.attrs["groups"] > 1 for n in graph.nodes) == 17


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.cumsum(self.conv(x), dim=1)


def test_unsupported_operator_names_it_and_where():
    with pytest.raises(
        wb.UnsupportedOperator, match=r"unsupported operator aten\.cumsum\.default \(node 'cumsum'"
    ) as exc:
        wb.from_torch(Unsupported(), (torch.randn(1, 3, 8, 8),))
    assert "torch.cumsum(self.conv(x), dim=1)" in str(exc.value)
    assert isinstance(exc.value, NotImplementedError)
