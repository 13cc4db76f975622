// Package hub finds weights files by the names PyTorch, torchvision, timm and Hugging Face users
// give them, downloading each once into the caches Python's libraries use, so that a file one has
// fetched the other reads:
//
//   - a path to a file: the file itself;
//   - "hf-hub:ORG/NAME" or "hf-hub:ORG/NAME@REVISION" (timm's names for the Hugging Face hub,
//     "hf-hub:timm/convnext_atto.d2_in1k"), and timm's "NAME.TAG" ("convnext_atto.d2_in1k", the
//     repository timm/NAME.TAG): the repository's model.safetensors, or its pytorch_model.bin
//     where it has none, from $HF_ENDPOINT (https://huggingface.co by default), kept in
//     huggingface_hub's cache as it keeps it ($HF_HUB_CACHE, $HF_HOME/hub or
//     ~/.cache/huggingface/hub: models--ORG--NAME/blobs, snapshots and refs);
//   - torchvision's weight names, as its Weights enums name them: the model, a dot and the member
//     ("resnet50.IMAGENET1K_V2", "vit_b_16.IMAGENET1K_SWAG_E2E_V1", "efficientnet_b1.DEFAULT":
//     DEFAULT is the member torchvision's DEFAULT is), for its ImageNet classifiers of the
//     families ResNet, ResNeXt and Wide ResNet, ConvNeXt, EfficientNet and EfficientNetV2,
//     MobileNetV2 and V3, RegNet, Swin and Swin V2, and ViT; and any http:// or https:// URL whose
//     file is named as torchvision's are, NAME-HASH.pth: kept where torch.hub keeps them
//     ($TORCH_HOME/hub/checkpoints, ~/.cache/torch by default);
//   - any other http:// or https:// URL: kept in stoke's cache ($STOKE_CACHE/weights, or the
//     user's cache folder's stoke/weights) under a hash of the URL, since two URLs may share a
//     file name.
//
// A download is checked before it is kept: against the hash prefix in a torchvision name (as
// torch.hub's check_hash), against the hub's SHA-256 (its ETag of a large file), and its first
// bytes must be those of safetensors or of torch.save's formats. It is written under a temporary
// name and renamed, one process at a time (a lock; another waits, then finds the file), and an
// interrupted download whose whole can be checked resumes where it stopped (an HTTP Range).
// $HF_HUB_OFFLINE set to 1 takes hub files from the cache alone (URLs still download);
// $HF_TOKEN (or $HF_HOME/token) is sent to the hub's host and to no other, not even on its
// redirects to its storage.
//
// A name also says how its weights evaluate: Config fetches a hub repository's config.json (timm's
// pretrained_cfg), and TransformOf gives a torchvision name its member's own transform, which
// differs between the members of one model (resnet50.IMAGENET1K_V1 resizes to 256, IMAGENET1K_V2
// to 232, both crop 224; the SWAG_E2E members crop 384 and more).
package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stoke-ml/stoke/internal/atomicfile"
	"github.com/stoke-ml/stoke/internal/filelock"
	"github.com/stoke-ml/stoke/transforms"
)

// ErrName: a name that is no file, URL, hf-hub: repository, timm or torchvision weights name.
var ErrName = errors.New("no weights of that name")

// ErrOffline: $HF_HUB_OFFLINE is set and the cache does not hold the file.
var ErrOffline = errors.New("offline (HF_HUB_OFFLINE) and not in the cache")

// maxDownload bounds a download (vit_h_14's weights are 2.5 GB).
const maxDownload = 16 << 30

// Transform is the evaluation transform torchvision's weights were made with, as their
// transforms() gives it (ImageClassification's resize_size, crop_size, interpolation, mean and
// std): the shorter side resized to Resize with Filter (antialiased), the central Crop x Crop,
// the RGB values on [0,1] normalized by Mean and Std.
type Transform struct {
	Resize, Crop int
	Filter       transforms.Filter
	Mean, Std    [3]float32
}

// tvWeights are the file of one member of a torchvision Weights enum, its transform (resize, crop,
// filter and normalization), and "DEFAULT" when the enum's DEFAULT is this member.
type tvWeights struct {
	file         string
	resize, crop int
	filter       transforms.Filter
	norm         normalization
	alias        string
}

// normalization is a transform's mean and std.
type normalization struct{ mean, std [3]float32 }

var (
	// imageNet is ImageNet's mean and std, torchvision's default; half is 0.5 for both, the
	// normalization of efficientnet_v2_l's weights (ported from the paper's).
	imageNet = normalization{[3]float32{0.485, 0.456, 0.406}, [3]float32{0.229, 0.224, 0.225}}
	half     = normalization{[3]float32{0.5, 0.5, 0.5}, [3]float32{0.5, 0.5, 0.5}}
)

const bilinear, bicubic = transforms.Bilinear, transforms.Bicubic

// torchvision are torchvision's weights of ImageNet classification for the models of the families
// below, by model and Weights member, as torchvision's source names them (torchvision/models/*.py,
// each member's url= and transforms=partial(ImageClassification, ...)), and the last column is
// "DEFAULT" for the member its Weights enum's DEFAULT is. The SWAG weights are here too: the
// SWAG_LINEAR members evaluate at 224, the SWAG_E2E members at their own size (384, vit_l_16's
// 512, vit_h_14's 518), the crop of their transform, at which a model is built for them (a ViT's
// position embedding has that grid, as torchvision's get_model(weights=) builds it).
var torchvision = map[string]tvWeights{
	// resnet.py: ResNet, ResNeXt, Wide ResNet
	"resnet101.IMAGENET1K_V1":        {"resnet101-63fe2227.pth", 256, 224, bilinear, imageNet, ""},
	"resnet101.IMAGENET1K_V2":        {"resnet101-cd907fc2.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"resnet152.IMAGENET1K_V1":        {"resnet152-394f9c45.pth", 256, 224, bilinear, imageNet, ""},
	"resnet152.IMAGENET1K_V2":        {"resnet152-f82ba261.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"resnet18.IMAGENET1K_V1":         {"resnet18-f37072fd.pth", 256, 224, bilinear, imageNet, "DEFAULT"},
	"resnet34.IMAGENET1K_V1":         {"resnet34-b627a593.pth", 256, 224, bilinear, imageNet, "DEFAULT"},
	"resnet50.IMAGENET1K_V1":         {"resnet50-0676ba61.pth", 256, 224, bilinear, imageNet, ""},
	"resnet50.IMAGENET1K_V2":         {"resnet50-11ad3fa6.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"resnext101_32x8d.IMAGENET1K_V1": {"resnext101_32x8d-8ba56ff5.pth", 256, 224, bilinear, imageNet, ""},
	"resnext101_32x8d.IMAGENET1K_V2": {"resnext101_32x8d-110c445d.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"resnext101_64x4d.IMAGENET1K_V1": {"resnext101_64x4d-173b62eb.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"resnext50_32x4d.IMAGENET1K_V1":  {"resnext50_32x4d-7cdf4587.pth", 256, 224, bilinear, imageNet, ""},
	"resnext50_32x4d.IMAGENET1K_V2":  {"resnext50_32x4d-1a0047aa.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"wide_resnet101_2.IMAGENET1K_V1": {"wide_resnet101_2-32ee1156.pth", 256, 224, bilinear, imageNet, ""},
	"wide_resnet101_2.IMAGENET1K_V2": {"wide_resnet101_2-d733dc28.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"wide_resnet50_2.IMAGENET1K_V1":  {"wide_resnet50_2-95faca4d.pth", 256, 224, bilinear, imageNet, ""},
	"wide_resnet50_2.IMAGENET1K_V2":  {"wide_resnet50_2-9ba9bcbe.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	// convnext.py
	"convnext_base.IMAGENET1K_V1":  {"convnext_base-6075fbad.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"convnext_large.IMAGENET1K_V1": {"convnext_large-ea097f82.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"convnext_small.IMAGENET1K_V1": {"convnext_small-0c510722.pth", 230, 224, bilinear, imageNet, "DEFAULT"},
	"convnext_tiny.IMAGENET1K_V1":  {"convnext_tiny-983f1562.pth", 236, 224, bilinear, imageNet, "DEFAULT"},
	// efficientnet.py: EfficientNet (V1 ported from timm and from lukemelas, b1's IMAGENET1K_V2 retrained) and EfficientNetV2
	"efficientnet_b0.IMAGENET1K_V1":   {"efficientnet_b0_rwightman-3dd342df.pth", 256, 224, bicubic, imageNet, "DEFAULT"},
	"efficientnet_b1.IMAGENET1K_V1":   {"efficientnet_b1_rwightman-533bc792.pth", 256, 240, bicubic, imageNet, ""},
	"efficientnet_b1.IMAGENET1K_V2":   {"efficientnet_b1-c27df63c.pth", 255, 240, bilinear, imageNet, "DEFAULT"},
	"efficientnet_b2.IMAGENET1K_V1":   {"efficientnet_b2_rwightman-bcdf34b7.pth", 288, 288, bicubic, imageNet, "DEFAULT"},
	"efficientnet_b3.IMAGENET1K_V1":   {"efficientnet_b3_rwightman-cf984f9c.pth", 320, 300, bicubic, imageNet, "DEFAULT"},
	"efficientnet_b4.IMAGENET1K_V1":   {"efficientnet_b4_rwightman-7eb33cd5.pth", 384, 380, bicubic, imageNet, "DEFAULT"},
	"efficientnet_b5.IMAGENET1K_V1":   {"efficientnet_b5_lukemelas-b6417697.pth", 456, 456, bicubic, imageNet, "DEFAULT"},
	"efficientnet_b6.IMAGENET1K_V1":   {"efficientnet_b6_lukemelas-c76e70fd.pth", 528, 528, bicubic, imageNet, "DEFAULT"},
	"efficientnet_b7.IMAGENET1K_V1":   {"efficientnet_b7_lukemelas-dcc49843.pth", 600, 600, bicubic, imageNet, "DEFAULT"},
	"efficientnet_v2_l.IMAGENET1K_V1": {"efficientnet_v2_l-59c71312.pth", 480, 480, bicubic, half, "DEFAULT"},
	"efficientnet_v2_m.IMAGENET1K_V1": {"efficientnet_v2_m-dc08266a.pth", 480, 480, bilinear, imageNet, "DEFAULT"},
	"efficientnet_v2_s.IMAGENET1K_V1": {"efficientnet_v2_s-dd5fe13b.pth", 384, 384, bilinear, imageNet, "DEFAULT"},
	// mobilenetv2.py, mobilenetv3.py
	"mobilenet_v2.IMAGENET1K_V1":       {"mobilenet_v2-b0353104.pth", 256, 224, bilinear, imageNet, ""},
	"mobilenet_v2.IMAGENET1K_V2":       {"mobilenet_v2-7ebf99e0.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"mobilenet_v3_large.IMAGENET1K_V1": {"mobilenet_v3_large-8738ca79.pth", 256, 224, bilinear, imageNet, ""},
	"mobilenet_v3_large.IMAGENET1K_V2": {"mobilenet_v3_large-5c1a4163.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"mobilenet_v3_small.IMAGENET1K_V1": {"mobilenet_v3_small-047dcff4.pth", 256, 224, bilinear, imageNet, "DEFAULT"},
	// regnet.py
	"regnet_x_16gf.IMAGENET1K_V1":              {"regnet_x_16gf-2007eb11.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_x_16gf.IMAGENET1K_V2":              {"regnet_x_16gf-ba3796d7.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_x_1_6gf.IMAGENET1K_V1":             {"regnet_x_1_6gf-e3633e7f.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_x_1_6gf.IMAGENET1K_V2":             {"regnet_x_1_6gf-a12f2b72.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_x_32gf.IMAGENET1K_V1":              {"regnet_x_32gf-9d47f8d0.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_x_32gf.IMAGENET1K_V2":              {"regnet_x_32gf-6eb8fdc6.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_x_3_2gf.IMAGENET1K_V1":             {"regnet_x_3_2gf-f342aeae.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_x_3_2gf.IMAGENET1K_V2":             {"regnet_x_3_2gf-7071aa85.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_x_400mf.IMAGENET1K_V1":             {"regnet_x_400mf-adf1edd5.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_x_400mf.IMAGENET1K_V2":             {"regnet_x_400mf-62229a5f.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_x_800mf.IMAGENET1K_V1":             {"regnet_x_800mf-ad17e45c.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_x_800mf.IMAGENET1K_V2":             {"regnet_x_800mf-94a99ebd.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_x_8gf.IMAGENET1K_V1":               {"regnet_x_8gf-03ceed89.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_x_8gf.IMAGENET1K_V2":               {"regnet_x_8gf-2b70d774.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_y_128gf.IMAGENET1K_SWAG_E2E_V1":    {"regnet_y_128gf_swag-c8ce3e52.pth", 384, 384, bicubic, imageNet, "DEFAULT"},
	"regnet_y_128gf.IMAGENET1K_SWAG_LINEAR_V1": {"regnet_y_128gf_lc_swag-cbe8ce12.pth", 224, 224, bicubic, imageNet, ""},
	"regnet_y_16gf.IMAGENET1K_V1":              {"regnet_y_16gf-9e6ed7dd.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_y_16gf.IMAGENET1K_V2":              {"regnet_y_16gf-3e4a00f9.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_y_16gf.IMAGENET1K_SWAG_E2E_V1":     {"regnet_y_16gf_swag-43afe44d.pth", 384, 384, bicubic, imageNet, ""},
	"regnet_y_16gf.IMAGENET1K_SWAG_LINEAR_V1":  {"regnet_y_16gf_lc_swag-f3ec0043.pth", 224, 224, bicubic, imageNet, ""},
	"regnet_y_1_6gf.IMAGENET1K_V1":             {"regnet_y_1_6gf-b11a554e.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_y_1_6gf.IMAGENET1K_V2":             {"regnet_y_1_6gf-0d7bc02a.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_y_32gf.IMAGENET1K_V1":              {"regnet_y_32gf-4dee3f7a.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_y_32gf.IMAGENET1K_V2":              {"regnet_y_32gf-8db6d4b5.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_y_32gf.IMAGENET1K_SWAG_E2E_V1":     {"regnet_y_32gf_swag-04fdfa75.pth", 384, 384, bicubic, imageNet, ""},
	"regnet_y_32gf.IMAGENET1K_SWAG_LINEAR_V1":  {"regnet_y_32gf_lc_swag-e1583746.pth", 224, 224, bicubic, imageNet, ""},
	"regnet_y_3_2gf.IMAGENET1K_V1":             {"regnet_y_3_2gf-b5a9779c.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_y_3_2gf.IMAGENET1K_V2":             {"regnet_y_3_2gf-9180c971.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_y_400mf.IMAGENET1K_V1":             {"regnet_y_400mf-c65dace8.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_y_400mf.IMAGENET1K_V2":             {"regnet_y_400mf-e6988f5f.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_y_800mf.IMAGENET1K_V1":             {"regnet_y_800mf-1b27b58c.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_y_800mf.IMAGENET1K_V2":             {"regnet_y_800mf-58fc7688.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	"regnet_y_8gf.IMAGENET1K_V1":               {"regnet_y_8gf-d0d0e4a8.pth", 256, 224, bilinear, imageNet, ""},
	"regnet_y_8gf.IMAGENET1K_V2":               {"regnet_y_8gf-dc2b1b54.pth", 232, 224, bilinear, imageNet, "DEFAULT"},
	// swin_transformer.py: Swin and Swin V2
	"swin_b.IMAGENET1K_V1":    {"swin_b-68c6b09e.pth", 238, 224, bicubic, imageNet, "DEFAULT"},
	"swin_s.IMAGENET1K_V1":    {"swin_s-5e29d889.pth", 246, 224, bicubic, imageNet, "DEFAULT"},
	"swin_t.IMAGENET1K_V1":    {"swin_t-704ceda3.pth", 232, 224, bicubic, imageNet, "DEFAULT"},
	"swin_v2_b.IMAGENET1K_V1": {"swin_v2_b-781e5279.pth", 272, 256, bicubic, imageNet, "DEFAULT"},
	"swin_v2_s.IMAGENET1K_V1": {"swin_v2_s-637d8ceb.pth", 260, 256, bicubic, imageNet, "DEFAULT"},
	"swin_v2_t.IMAGENET1K_V1": {"swin_v2_t-b137f0e2.pth", 260, 256, bicubic, imageNet, "DEFAULT"},
	// vision_transformer.py
	"vit_b_16.IMAGENET1K_V1":             {"vit_b_16-c867db91.pth", 256, 224, bilinear, imageNet, "DEFAULT"},
	"vit_b_16.IMAGENET1K_SWAG_E2E_V1":    {"vit_b_16_swag-9ac1b537.pth", 384, 384, bicubic, imageNet, ""},
	"vit_b_16.IMAGENET1K_SWAG_LINEAR_V1": {"vit_b_16_lc_swag-4e70ced5.pth", 224, 224, bicubic, imageNet, ""},
	"vit_b_32.IMAGENET1K_V1":             {"vit_b_32-d86f8d99.pth", 256, 224, bilinear, imageNet, "DEFAULT"},
	"vit_h_14.IMAGENET1K_SWAG_E2E_V1":    {"vit_h_14_swag-80465313.pth", 518, 518, bicubic, imageNet, "DEFAULT"},
	"vit_h_14.IMAGENET1K_SWAG_LINEAR_V1": {"vit_h_14_lc_swag-c1eb923e.pth", 224, 224, bicubic, imageNet, ""},
	"vit_l_16.IMAGENET1K_V1":             {"vit_l_16-852ce7e3.pth", 242, 224, bilinear, imageNet, "DEFAULT"},
	"vit_l_16.IMAGENET1K_SWAG_E2E_V1":    {"vit_l_16_swag-4f3808c9.pth", 512, 512, bicubic, imageNet, ""},
	"vit_l_16.IMAGENET1K_SWAG_LINEAR_V1": {"vit_l_16_lc_swag-4d563306.pth", 224, 224, bicubic, imageNet, ""},
	"vit_l_32.IMAGENET1K_V1":             {"vit_l_32-c7638314.pth", 256, 224, bilinear, imageNet, "DEFAULT"},
}

var (
	// hashName is torchvision's file name, NAME-HASH.pth, HASH a prefix of the file's SHA-256.
	hashName = regexp.MustCompile(`-([0-9a-f]{8,64})\.pth$`)
	// timmName is timm's NAME.TAG of a pretrained model, "convnext_atto.d2_in1k".
	timmName = regexp.MustCompile(`^[a-z0-9_]+\.[a-z0-9_]+$`)
	// hubRepo is an ORG/NAME repository of the hub.
	hubRepo = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	// commitHash is a git commit's full hash; etagForm the hub's ETag of a file, a git blob's hash
	// or (of a large file) its SHA-256.
	commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)
	etagForm   = regexp.MustCompile(`^[0-9a-f]{40}$|^[0-9a-f]{64}$`)
)

// client gives up on a server that does not answer: a dial, a TLS handshake or the response's
// header that takes over a minute. A body that stops is caught by idle in get.
var client = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	TLSHandshakeTimeout:   30 * time.Second,
	ResponseHeaderTimeout: time.Minute,
}}

// idle is how long a download may receive nothing before it is abandoned.
var idle = time.Minute

// URL is where name's weights are downloaded from (a hub repository's model.safetensors), and
// false for a name that is a local file or none of the forms above.
func URL(name string) (string, bool) {
	if strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://") {
		return name, true
	}
	if repo, rev, ok := hubName(name); ok {
		return resolveURL(repo, rev, "model.safetensors"), true
	}
	if w, ok := torchvisionWeights(name); ok {
		return "https://download.pytorch.org/models/" + w.file, true
	}
	return "", false
}

// Model is the model a weights name names, as timm's create_model and torchvision's get_model
// take it from one name, in the zoo's names: MODEL of torchvision's MODEL.WEIGHTS, "timm/NAME" of
// timm's NAME.TAG and of hf-hub:timm/NAME.TAG; false for other names (a file, a URL, another
// organization's repository).
func Model(name string) (string, bool) {
	if _, ok := torchvisionWeights(name); ok {
		model, _, _ := strings.Cut(name, ".")
		return model, true
	}
	if repo, _, ok := hubName(name); ok {
		if model, tag, ok := strings.Cut(repo, "."); strings.HasPrefix(repo, "timm/") && ok && tag != "" {
			return model, true
		}
	}
	return "", false
}

// TransformOf returns the evaluation transform of torchvision's weights name, MODEL.WEIGHTS or
// MODEL.DEFAULT, which differs between the members of one model (resnet50.IMAGENET1K_V1 resizes
// to 256, IMAGENET1K_V2 to 232; vit_b_16.IMAGENET1K_SWAG_E2E_V1 crops 384); false for any other
// name.
func TransformOf(name string) (Transform, bool) {
	w, ok := torchvisionWeights(name)
	if !ok {
		return Transform{}, false
	}
	return Transform{Resize: w.resize, Crop: w.crop, Filter: w.filter, Mean: w.norm.mean, Std: w.norm.std}, true
}

// Check reports, without fetching anything, why name names no weights: an error wrapping ErrName
// for a name that is no file, URL, hub repository, timm or torchvision weights name, which for
// MODEL.MEMBER of a model with torchvision weights lists the members it has (as torchvision's
// get_weight does); nil for a name Fetch takes.
func Check(name string) error {
	if _, err := os.Stat(name); err == nil {
		return nil
	}
	if _, ok := URL(name); ok {
		return nil
	}
	if _, _, ok := hubName(name); ok {
		return nil
	}
	model, _, _ := strings.Cut(name, ".")
	var members []string
	for k, w := range torchvision {
		if m, member, _ := strings.Cut(k, "."); m == model {
			members = append(members, member)
			if w.alias != "" {
				members = append(members, w.alias)
			}
		}
	}
	if len(members) > 0 {
		slices.Sort(members)
		return fmt.Errorf("hub: %w %q: torchvision's weights of %s are %s", ErrName, name, model, strings.Join(members, ", "))
	}
	return fmt.Errorf("hub: %w %q: not a file, an http(s):// URL, hf-hub:ORG/NAME, timm's NAME.TAG nor torchvision's "+
		"MODEL.WEIGHTS (resnet50.IMAGENET1K_V2, vit_b_16.DEFAULT)", ErrName, name)
}

// torchvisionWeights are the weights of torchvision's weights name, MODEL.MEMBER, the member
// DEFAULT the one its enum's DEFAULT is.
func torchvisionWeights(name string) (tvWeights, bool) {
	model, member, ok := strings.Cut(name, ".")
	if !ok {
		return tvWeights{}, false
	}
	if member == "DEFAULT" {
		for k, w := range torchvision {
			if w.alias == "DEFAULT" && strings.HasPrefix(k, model+".") {
				return w, true
			}
		}
		return tvWeights{}, false
	}
	w, ok := torchvision[name]
	return w, ok
}

// hubName is the repository and revision of "hf-hub:ORG/NAME[@REV]" or of timm's NAME.TAG (not a
// file's name: "weights.safetensors" is a missing file, not a model).
func hubName(name string) (repo, rev string, ok bool) {
	if rest, isHub := strings.CutPrefix(name, "hf-hub:"); isHub {
		repo, rev, _ = strings.Cut(rest, "@")
		if rev == "" {
			rev = "main"
		}
		return repo, rev, true
	}
	switch path.Ext(name) {
	case ".safetensors", ".pth", ".pt", ".bin", ".ckpt", ".onnx", ".json", ".npz", ".h5", ".gguf", ".msgpack":
		return "", "", false // a missing file, not a model
	}
	if timmName.MatchString(name) {
		return "timm/" + name, "main", true
	}
	return "", "", false
}

// endpoint is the hub's address, $HF_ENDPOINT or https://huggingface.co.
func endpoint() string {
	if e := strings.TrimSuffix(os.Getenv("HF_ENDPOINT"), "/"); e != "" {
		return e
	}
	return "https://huggingface.co"
}

func resolveURL(repo, rev, file string) string {
	return fmt.Sprintf("%s/%s/resolve/%s/%s", endpoint(), repo, url.PathEscape(rev), file)
}

// Progress is told how a download goes: done of total bytes (total -1 when the server does not
// say), from the download's goroutine, as its bytes arrive.
type Progress func(done, total int64)

// Fetch returns the path of the weights name gives: the file itself, or the cached download of
// the file it names, downloaded now if the cache does not hold it, reported to progress (which
// may be nil). An unknown name gives an error wrapping ErrName; a hub file not in the cache while
// $HF_HUB_OFFLINE is set, ErrOffline.
func Fetch(ctx context.Context, name string, progress Progress) (string, error) {
	if _, err := os.Stat(name); err == nil {
		return name, nil
	}
	if repo, rev, ok := hubName(name); ok {
		p, err := fetchHub(ctx, repo, rev, progress)
		if err != nil {
			return "", fmt.Errorf("hub: %s: %w", name, err)
		}
		return p, nil
	}
	u, ok := URL(name)
	if !ok {
		return "", Check(name)
	}
	p, err := fetchURL(ctx, u, progress)
	if err != nil {
		return "", fmt.Errorf("hub: %s: %w", name, err)
	}
	return p, nil
}

// fetchURL fetches a URL's file into torch.hub's cache (a torchvision name) or stoke's.
func fetchURL(ctx context.Context, u string, progress Progress) (string, error) {
	base := baseName(u)
	var dst, sum string
	m := hashName.FindStringSubmatch(base)
	if m != nil {
		sum = m[1]
	}
	// torchvision's own files go where torch.hub keeps them; a file of another host that is named
	// as one of them could otherwise take its place there, checked against 32 bits of hash alone.
	if pu, err := url.Parse(u); err == nil && m != nil && pu.Scheme == "https" && pu.Host == "download.pytorch.org" {
		dir, err := torchCache()
		if err != nil {
			return "", err
		}
		dst = filepath.Join(dir, base)
	} else {
		dir, err := stokeDir()
		if err != nil {
			return "", err
		}
		h := sha256.Sum256([]byte(u))
		dst = filepath.Join(dir, hex.EncodeToString(h[:6])+"-"+base)
	}
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	locks, err := stokeDir()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(dst))
	return dst, fetchTo(ctx, u, dst, filepath.Join(locks, ".locks", hex.EncodeToString(h[:8])+".lock"), sum, nil, progress)
}

// fetchHub fetches repo's weights at rev into huggingface_hub's cache.
func fetchHub(ctx context.Context, repo, rev string, progress Progress) (string, error) {
	// A repository of PyTorch weights alone has the second.
	return fetchHubFirst(ctx, repo, rev, []string{"model.safetensors", "pytorch_model.bin"}, progress)
}

// Config returns the path of the config.json of the hub repository that name names (timm keeps a
// model's pretrained_cfg there: input size, interpolation, crop_pct, mean, std, classes), fetched
// into huggingface_hub's cache as Fetch fetches weights; "" and no error when name names no hub
// repository or the repository has no config.json.
func Config(ctx context.Context, name string) (string, error) {
	repo, rev, ok := hubName(name)
	if !ok {
		return "", nil
	}
	p, err := fetchHubFirst(ctx, repo, rev, []string{"config.json"}, nil)
	if errors.Is(err, errNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hub: %s: %w", name, err)
	}
	return p, nil
}

// fetchHubFirst fetches the first of files that repo has at rev: from the cache when it holds
// one, else the first that the hub does not answer 404.
func fetchHubFirst(ctx context.Context, repo, rev string, files []string, progress Progress) (string, error) {
	if !hubRepo.MatchString(repo) || strings.Contains(repo, "..") || strings.ContainsAny(rev, `/\`) || strings.Contains(rev, "..") {
		return "", fmt.Errorf("%w: the hub's repositories are ORG/NAME, a revision a branch, tag or commit", ErrName)
	}
	cache, err := hubCache()
	if err != nil {
		return "", err
	}
	folder := "models--" + strings.ReplaceAll(repo, "/", "--")
	repoDir := filepath.Join(cache, folder)
	commit := rev
	if !commitHash.MatchString(rev) {
		b, _ := os.ReadFile(filepath.Join(repoDir, "refs", rev))
		commit = strings.TrimSpace(string(b))
	}
	for _, f := range files {
		if p := filepath.Join(repoDir, "snapshots", commit, f); commit != "" {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	if offline() {
		return "", ErrOffline
	}
	for _, f := range files {
		p, err := fetchHubFile(ctx, cache, folder, repo, rev, f, progress)
		if !errors.Is(err, errNotFound) || f == files[len(files)-1] {
			return p, err
		}
	}
	return "", errNotFound // no files
}

// fetchHubFile fetches file of repo at rev as huggingface_hub does: the commit and the blob's
// ETag from the resolve URL's headers, the blob into blobs/ETAG (unless it is there already), a
// link to it in snapshots/COMMIT/file, and the commit in refs/rev.
func fetchHubFile(ctx context.Context, cache, folder, repo, rev, file string, progress Progress) (string, error) {
	commit, etag, err := describe(ctx, resolveURL(repo, rev, file))
	if err != nil {
		return "", err
	}
	repoDir := filepath.Join(cache, folder)
	blob := filepath.Join(repoDir, "blobs", etag)
	if _, err := os.Stat(blob); err != nil {
		// The file at the commit described, whatever the revision has moved to since; its ETag
		// checks it: a large (LFS) file's is its SHA-256, a small one's its git blob hash.
		u := resolveURL(repo, commit, file)
		sum := etag
		if len(etag) == 40 {
			sum = gitBlob + etag
		}
		if err := fetchTo(ctx, u, blob, filepath.Join(cache, ".locks", folder, etag+".lock"), sum, authFor(u), progress); err != nil {
			return "", err
		}
	}
	snap := filepath.Join(repoDir, "snapshots", commit, file)
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return "", err
	}
	if _, err := os.Lstat(snap); err != nil {
		// A relative link, as huggingface_hub makes: the cache may be moved. Where links are
		// refused, the snapshot holds the blob's path itself.
		rel := filepath.Join("..", "..", "blobs", etag)
		if err := os.Symlink(rel, snap); err != nil && !errors.Is(err, os.ErrExist) {
			if err := os.Link(blob, snap); err != nil && !errors.Is(err, os.ErrExist) {
				return "", err
			}
		}
	}
	if rev != commit {
		ref := filepath.Join(repoDir, "refs", rev)
		if err := os.MkdirAll(filepath.Dir(ref), 0o755); err != nil {
			return "", err
		}
		if err := atomicfile.Write(ref, 0o644, func(w io.Writer) error { _, err := io.WriteString(w, commit); return err }); err != nil {
			return "", err
		}
	}
	return snap, nil
}

// describe asks the hub for the commit a resolve URL is at and its file's ETag (a HEAD, following
// redirects within the hub's host only: a large file's redirect to its storage carries both).
func describe(ctx context.Context, u string) (commit, etag string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return "", "", err
	}
	req.Header = authFor(u)
	c := *client
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if r.URL.Host != via[0].URL.Host || len(via) > 5 {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", "", fmt.Errorf("%s: %w", u, errNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return "", "", fmt.Errorf("%s: %s: a gated or private repository (set HF_TOKEN)", u, resp.Status)
	case resp.StatusCode >= 400:
		return "", "", fmt.Errorf("%s: %s", u, resp.Status)
	}
	commit = resp.Header.Get("X-Repo-Commit")
	etag = resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	if !commitHash.MatchString(commit) || !etagForm.MatchString(etag) {
		return "", "", fmt.Errorf("%s: no commit (X-Repo-Commit %q) or ETag (%q) in its answer: not a Hugging Face hub", u, commit, etag)
	}
	return commit, etag, nil
}

// authFor is the header of a request to u: the hub's token for the hub's host.
func authFor(u string) http.Header {
	h := http.Header{}
	tok := os.Getenv("HF_TOKEN")
	if tok == "" {
		if home, err := hfHome(); err == nil {
			b, _ := os.ReadFile(filepath.Join(home, "token"))
			tok = strings.TrimSpace(string(b))
		}
	}
	pu, err1 := url.Parse(u)
	pe, err2 := url.Parse(endpoint())
	if tok != "" && err1 == nil && err2 == nil && pu.Host == pe.Host {
		h.Set("Authorization", "Bearer "+tok)
	}
	return h
}

// offline reports whether $HF_HUB_OFFLINE says to use the cache alone.
func offline() bool {
	switch strings.ToUpper(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// hfHome is $HF_HOME, or the user's cache folder's huggingface.
func hfHome() (string, error) {
	if h := os.Getenv("HF_HOME"); h != "" {
		return h, nil
	}
	return userCache("huggingface")
}

// hubCache is huggingface_hub's cache: $HF_HUB_CACHE, or $HF_HOME's hub.
func hubCache() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	home, err := hfHome()
	return filepath.Join(home, "hub"), err
}

// torchCache is torch.hub's cache of weights: $TORCH_HOME/hub/checkpoints, TORCH_HOME the user's
// cache folder's torch by default.
func torchCache() (string, error) {
	home := os.Getenv("TORCH_HOME")
	if home == "" {
		var err error
		if home, err = userCache("torch"); err != nil {
			return "", err
		}
	}
	return filepath.Join(home, "hub", "checkpoints"), nil
}

// userCache is sub in the user's cache folder ($XDG_CACHE_HOME, ~/.cache).
func userCache(sub ...string) (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder (set HF_HOME, TORCH_HOME and STOKE_CACHE): %w", err)
	}
	return filepath.Join(append([]string{d}, sub...)...), nil
}

// stokeDir is stoke's cache of weights: $STOKE_CACHE/weights, or the user's cache folder's
// stoke/weights.
func stokeDir() (string, error) {
	if d := os.Getenv("STOKE_CACHE"); d != "" {
		return filepath.Join(d, "weights"), nil
	}
	return userCache("stoke", "weights")
}

var errNotFound = errors.New("not found (404)")

// baseName is the file name of u's path, without its query ("model.safetensors?download=true").
func baseName(u string) string {
	// A \ or : (an escaped one, %5C) would be a separator or a drive in a Windows path.
	if p, err := url.Parse(u); err == nil && path.Base(p.Path) != "/" && path.Base(p.Path) != "." && !strings.ContainsAny(path.Base(p.Path), `\:`) {
		return path.Base(p.Path)
	}
	return "weights"
}

// fetchTo downloads u into dst unless another process has meanwhile (under the lock at lock): to
// dst.incomplete, resumed where an interrupted download stopped when sum (a hex SHA-256 or a
// prefix of it) can check the whole, then checked (sum, and the first bytes those of a weights
// file) and renamed to dst.
func fetchTo(ctx context.Context, u, dst, lock, sum string, header http.Header, progress Progress) error {
	for _, d := range []string{filepath.Dir(dst), filepath.Dir(lock)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	unlock, err := filelock.Lock(ctx, lock)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(dst); err == nil {
		return nil // fetched by another process while this one waited
	}
	part := dst + ".incomplete"
	if sum == "" {
		os.Remove(part) // nothing could tell a spliced file from a whole one
	}
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	resumed, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	err = get(ctx, u, f, header, progress)
	if err == nil {
		err = check(f, u, sum)
	}
	if resumed > 0 && (errors.Is(err, errDamaged) || errors.Is(err, errRange)) {
		// What an interrupted download left may not be the start of this file (another object
		// then, a longer one): once more from the first byte.
		if err = f.Truncate(0); err == nil {
			if err = get(ctx, u, f, header, progress); err == nil {
				err = check(f, u, sum)
			}
		}
	}
	if err != nil {
		if sum != "" && !errors.Is(err, errDamaged) {
			return err // kept to resume from, the whole checked once it is there
		}
		f.Close()
		os.Remove(part)
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Rename(part, dst)
}

var (
	// errDamaged: a download whose whole does not match its hash.
	errDamaged = errors.New("a damaged download")
	// errRange: the server's answer to a Range does not continue what is there.
	errRange = errors.New("the rest does not continue what is there")
)

// get appends u's body to f from f's size on (a Range), or writes it whole where the server
// sends it whole.
func get(ctx context.Context, u string, f *os.File, header http.Header, progress Progress) error {
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	c := *client
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if r.URL.Host != via[0].URL.Host || r.URL.Scheme != via[0].URL.Scheme {
			r.Header.Del("Authorization") // the token is the hub's, not its storage's (Go keeps it for a subdomain)
		}
		return nil
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", u, errNotFound)
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && have > 0:
		if size, ok := strings.CutPrefix(resp.Header.Get("Content-Range"), "bytes */"); ok && size == strconv.FormatInt(have, 10) {
			return nil // whole already: check says whether it is right
		}
		return fmt.Errorf("%s: bytes from %d asked for, of a file of %q: %w", u, have, resp.Header.Get("Content-Range"), errRange)
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if first, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || first != have {
			return fmt.Errorf("%s: asked for bytes from %d, sent %q: %w", u, have, resp.Header.Get("Content-Range"), errRange)
		}
	case resp.StatusCode == http.StatusOK:
		if err := f.Truncate(0); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		have = 0
	default:
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	if resp.ContentLength > maxDownload-have {
		return fmt.Errorf("%s: %d bytes, over the %d a weights file may have", u, have+resp.ContentLength, int64(maxDownload))
	}
	stalled := fmt.Errorf("%s: nothing received for %v", u, idle)
	watchdog := time.AfterFunc(idle, func() { cancel(stalled) })
	defer watchdog.Stop()
	total := int64(-1)
	if resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	n, err := io.Copy(f, io.LimitReader(&reader{resp.Body, watchdog, progress, have, total}, maxDownload-have+1))
	switch {
	case context.Cause(ctx) == stalled:
		return stalled
	case err != nil:
		return fmt.Errorf("%s: %w", u, err)
	case have+n > maxDownload:
		return fmt.Errorf("%s: over the %d bytes a weights file may have", u, int64(maxDownload))
	}
	return nil
}

// rangeStart is the first byte of a Content-Range, "bytes FIRST-LAST/SIZE".
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	first, _, ok2 := strings.Cut(rest, "-")
	n, err := strconv.ParseInt(first, 10, 64)
	return n, ok && ok2 && err == nil
}

// check reads f whole: its SHA-256 must start with sum, its first bytes be those of a weights
// file, or of a JSON object for a .json.
func check(f *os.File, u, sum string) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	head := make([]byte, 9)
	n, _ := io.ReadFull(f, head)
	switch json := path.Ext(baseName(u)) == ".json"; {
	case json && !bytes.HasPrefix(bytes.TrimSpace(head[:n]), []byte("{")):
		return fmt.Errorf("%s: not a JSON object (it begins %q)", u, head[:n])
	case !json && !weightsFile(head[:n]):
		return fmt.Errorf("%s: not a weights file: neither safetensors nor PyTorch's (it begins %q)", u, head[:n])
	}
	if sum == "" {
		return nil
	}
	var h hash.Hash
	kind, want := "SHA-256", sum
	if rest, git := strings.CutPrefix(sum, gitBlob); git {
		size, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return err
		}
		h, kind, want = sha1.New(), "git blob hash", rest
		fmt.Fprintf(h, "blob %d\x00", size)
	} else {
		h = sha256.New()
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.HasPrefix(got, want) {
		return fmt.Errorf("%s: its %s %s does not start with %s, which its name or the hub gives (%w)", u, kind, got, want, errDamaged)
	}
	return nil
}

// gitBlob marks a sum that is a git blob's hash (SHA-1 of "blob SIZE\0" and the bytes), the hub's
// ETag of a small file.
const gitBlob = "git:"

// reader restarts the watchdog on every read that brings bytes, and reports them.
type reader struct {
	r           io.Reader
	watchdog    *time.Timer
	progress    Progress
	done, total int64
}

func (r *reader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		r.watchdog.Reset(idle)
		if r.done += int64(n); r.progress != nil {
			r.progress(r.done, r.total)
		}
	}
	return n, err
}

// weightsFile: head begins safetensors (a little-endian header length, then '{'), a zip archive
// (torch.save's) or a pickle (torch.save's legacy format, which the loaders name).
func weightsFile(head []byte) bool {
	switch {
	case len(head) >= 9 && head[8] == '{':
		return true
	case len(head) >= 4 && string(head[:4]) == "PK\x03\x04":
		return true
	case len(head) >= 2 && head[0] == 0x80 && head[1] <= 5:
		return true
	}
	return false
}
