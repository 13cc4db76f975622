// Package models is Stoke's model zoo: architectures written over package nn's ops, built by
// name as torchvision.models (and timm) builds them, with their arguments and state_dict names,
// so that torchvision's and timm's weights load and Stoke's weights export by name, and the
// registry that builds them: New builds a model by name with its arguments (timm's
// create_model(name, **kwargs)), `stoke train --model
// 'vit(image_size=28,patch_size=4,num_layers=4,num_heads=4,hidden_dim=64,mlp_dim=256)'` or
// train.NewModel with the same name; Register adds one's own, whose arguments DecodeArgs reads
// into a Go struct. Each family's Recipe (RecipeFor) and each model's weights' EvalTransform
// (EvalTransformFor) are registered beside it. The package knows nothing of training: a Model is
// a name and an nn.Module, which train.Net trains.
//
// Stoke's own models (builtin.go): mlp, cnn, the CIFAR ResNets resnet8 and resnet20, and
// torchvision's resnet18 and resnet50 with a 3x3 stem below 33 px.
//
// The builders, each with torchvision's keyword arguments:
//
//   - efficientnet_b0 to efficientnet_b7, efficientnet_v2_s, _m and _l(stochastic_depth_prob):
//     torchvision's EfficientNet V1 and V2; efficientnet(width_mult, depth_mult, dropout,
//     stochastic_depth_prob): V1 at any multipliers, torchvision's EfficientNet over
//     _efficientnet_conf's stages (efficientnet_b0 is width_mult=1,depth_mult=1).
//   - mobilenet_v2(width_mult, round_nearest, dropout), mobilenet_v3_large and
//     mobilenet_v3_small(width_mult, reduced_tail, dropout): torchvision's MobileNetV2 and
//     MobileNetV3 (reduced_tail=1 for True).
//   - vit(image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
//     attention_dropout): torchvision's VisionTransformer. vit_b_16, vit_b_32, vit_l_16,
//     vit_l_32 and vit_h_14 are its named configurations (image_size 224 unless given).
//   - swin(patch_size, embed_dim, depth_1, ..., depth_4, num_heads_1, ..., num_heads_4,
//     window_size, mlp_ratio, dropout, attention_dropout, stochastic_depth_prob) and swin_v2(the
//     same): torchvision's SwinTransformer with square patches and windows, V2 with
//     SwinTransformerBlockV2 and PatchMergingV2; swin_t, swin_s, swin_b, swin_v2_t, swin_v2_s and
//     swin_v2_b (stochastic_depth_prob only). Any image of at least one patch (maps padded to
//     whole windows, as torchvision's). torchvision's buffers relative_position_index and
//     relative_coords_table are constants of the forward pass, not tensors of the model: loads
//     check them, exports write them (weights.Derived).
//   - convnext(width_1, ..., width_4, depth_1, ..., depth_4, stochastic_depth_prob):
//     torchvision's ConvNeXt with block_setting [CNBlockConfig(width_i, width_i+1, depth_i)];
//     convnext_tiny, convnext_small, convnext_base and convnext_large (stochastic_depth_prob
//     only). Images of at least 32x32.
//   - resnet(layers_1, ..., layers_4, bottleneck, groups, width_per_group): torchvision's ResNet
//     with Bottleneck blocks (bottleneck=1, the default) or BasicBlock (bottleneck=0);
//     resnet34, resnet101, resnet152, resnext50_32x4d, resnext101_32x8d, resnext101_64x4d,
//     wide_resnet50_2 and wide_resnet101_2 (no arguments). resnet18 and resnet50 are
//     Stoke's own (builtin.go).
//   - regnet(depth_1, ..., depth_4, width_1, ..., width_4, group_width, se_ratio, stem_width):
//     torchvision's RegNet over BlockParams of those stage depths and widths (bottleneck
//     multiplier 1; a stage's group width is min(group_width, its width); se_ratio 0 for none,
//     stem_width 32 unless given); every regnet_x_* and regnet_y_* of torchvision (no arguments).
//
// And timm's, with timm.create_model's keyword arguments and timm's state_dict names, under
// the prefix "timm/": timm and torchvision both name a convnext_tiny and an efficientnet_b0, of
// one architecture and two state_dict layouts, and a weights file loads into one layout only; the
// prefix, on every timm builder, says which (as the Hugging Face hub names timm's weights,
// "timm/vit_tiny_patch16_224.augreg_in21k"):
//
//   - timm/vit_tiny_patch16_224, timm/vit_small_patch16_224, timm/vit_base_patch16_224,
//     timm/deit_tiny_patch16_224, timm/deit_small_patch16_224 and timm/deit_base_patch16_224
//     (img_size, patch_size, embed_dim, depth, num_heads, mlp_ratio, drop_rate, drop_path_rate):
//     timm's VisionTransformer (img_size 224 unless given).
//   - timm/convnext_atto, _femto, _pico, _nano, _tiny, _small and _base (drop_rate,
//     drop_path_rate): timm's ConvNeXt. Images of at least 32x32.
//   - timm/efficientnet_b0 to timm/efficientnet_b3 (drop_rate, drop_path_rate): timm's
//     EfficientNet.
//
// A ViT of either layout takes weights made for another image size or patch size: LoadWeights
// resamples their position embeddings to its grid (weights.Resampler), bicubic as timm's
// resample_abs_pos_embed.
//
// Depthwise convolutions (ConvNeXt's, MobileNet's, EfficientNet's) run kernels of their own
// (kernels.Ops.DepthwiseConv2D); other grouped convolutions (ResNeXt's, RegNet's) run one
// convolution per group.
//
// Each model with weights registers their evaluation transform (RegisterEvalTransform:
// torchvision 0.14's DEFAULT weights' transforms(), timm's default pretrained_cfg; see
// evaltransforms.go), which predict.New and stoke predict apply to photos by default.
//
// Each family registers its training recipe (RegisterRecipe, from its paper and timm's or
// torchvision's recipes: see recipes.go), which RecipeFor returns and stoke train uses by default.
// The ViTs, Swins and ConvNeXts of both namings are optim.Layered models, for layer-wise
// learning-rate decay (train.Config.LayerDecay), at timm's layer ids (layerdecay.go maps
// torchvision's names onto timm's layout).
//
// A model built fresh starts as its torchvision or timm constructor initializes it: the same
// distribution for each tensor (truncated normal, Kaiming normal, Xavier uniform, torch.nn's
// defaults), ConvNeXt's layer scales at 1e-6, Swin V2's logit scales at log 10, a torchvision
// ViT's head at zero.
//
// The input channels follow the data (torchvision's are 3). A model's name records the
// arguments it was built with, in a fixed order, so a checkpoint rebuilds it.
package models
