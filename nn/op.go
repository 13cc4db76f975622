package nn

// Op names an op a graph records: a Step's Op is its string, and package onnx keys each op's
// ONNX form by it (its tests fail when an op here has no form there and is not declared
// training-only).
type Op string

// The ops a graph records. The elementwise functions are named as kernels.UnaryFunc's String.
const (
	OpInput                     Op = "input"
	OpConstant                  Op = "constant"
	OpFull                      Op = "full"
	OpCheckpoint                Op = "checkpoint"
	OpAdd                       Op = "add"
	OpSub                       Op = "sub"
	OpMul                       Op = "mul"
	OpDiv                       Op = "div"
	OpScale                     Op = "scale"
	OpExp                       Op = "exp"
	OpLog                       Op = "log"
	OpSqrt                      Op = "sqrt"
	OpRsqrt                     Op = "rsqrt"
	OpSigmoid                   Op = "sigmoid"
	OpTanh                      Op = "tanh"
	OpGELU                      Op = "gelu"
	OpGELUTanh                  Op = "gelu_tanh"
	OpSiLU                      Op = "silu"
	OpHardswish                 Op = "hardswish"
	OpHardsigmoid               Op = "hardsigmoid"
	OpReLU6                     Op = "relu6"
	OpReLU                      Op = "relu"
	OpSum                       Op = "sum"
	OpReshape                   Op = "reshape"
	OpPermute                   Op = "permute"
	OpNarrow                    Op = "narrow"
	OpConcat                    Op = "concat"
	OpMatMul                    Op = "matmul"
	OpLinear                    Op = "linear"
	OpConv2D                    Op = "conv2d"
	OpBatchNorm                 Op = "batch_norm"
	OpLayerNorm                 Op = "layer_norm"
	OpSoftmax                   Op = "softmax"
	OpScaledDotProductAttention Op = "scaled_dot_product_attention"
	OpMaxPool2D                 Op = "max_pool2d"
	OpGlobalAvgPool             Op = "global_avg_pool"
	OpDropout                   Op = "dropout"
	OpCrossEntropy              Op = "cross_entropy"
	OpSoftCrossEntropy          Op = "soft_cross_entropy"
	OpBCEWithLogits             Op = "binary_cross_entropy_with_logits"
	OpMSE                       Op = "mse_loss"
	OpSmoothL1                  Op = "smooth_l1_loss"
)
