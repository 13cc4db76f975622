module example.com/stoke-external

go 1.26.0

require github.com/stoke-ml/stoke v0.0.0

require (
	github.com/google/uuid v1.1.1 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	golang.org/x/image v0.48.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gorgonia.org/cu v0.9.6 // indirect
)

replace github.com/stoke-ml/stoke => ../..
