// Package models is Stoke's model zoo: architectures written over package nn's ops, built by
// name as torchvision.models builds them, with torchvision's arguments and state_dict names, so
// that torchvision's weights load and Stoke's weights export by name. Importing the package
// registers its builders with train.RegisterModel: `stoke train --model
// 'vit(image_size=28,patch_size=4,num_layers=4,num_heads=4,hidden_dim=64,mlp_dim=256)'`, or
// train.NewModel with the same name.
//
// The builders, each with torchvision's keyword arguments:
//
//   - efficientnet_b0 to efficientnet_b7, efficientnet_v2_s, _m and _l(stochastic_depth_prob):
//     torchvision's EfficientNet V1 and V2.
//   - mobilenet_v2(width_mult, round_nearest, dropout), mobilenet_v3_large and
//     mobilenet_v3_small(width_mult, reduced_tail, dropout): torchvision's MobileNetV2 and
//     MobileNetV3 (reduced_tail=1 for True).
//   - vit(image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
//     attention_dropout): torchvision's VisionTransformer. vit_b_16, vit_b_32, vit_l_16,
//     vit_l_32 and vit_h_14 are its named configurations (image_size 224 unless given).
//
// The input channels follow the data (torchvision's are 3). A model's name records the
// arguments it was built with, in a fixed order, so a checkpoint rebuilds it.
package models
