package models

// The package's unexported parts that its external tests use.
var (
	Bicubic          = bicubic
	ResamplePosEmbed = resamplePosEmbed
	TimmPrefix       = timmPrefix
	TimmViTs         = timmViTs
	TimmConvNeXts    = timmConvNeXts
)

// TimmConvNeXtAtto is convnext_atto's configuration.
var TimmConvNeXtAtto = timmConvNeXts[0].cfg

// MBConvDropPath is an MBConv block's drop path probability and whether it adds its input.
func MBConvDropPath(b *MBConv) (float32, bool) { return b.dropPath, b.residual }
