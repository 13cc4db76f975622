# Stoke's two everyday commands are `make train` and `make test`; both work on a fresh machine with
# only Go installed (modules and MNIST come through the Go module proxy).
GO        ?= go
STOKE     := $(GO) run ./cmd/stoke
TRAINARGS ?= --data mnist --model mlp --checkpoint runs/mnist-mlp.ckpt

.PHONY: train test bench lint build external cuda cuda-bin cuda-test cuda-check cuda-sim cuda-sim-train

## train: train the MNIST MLP on the default (CPU) backend, its checkpoint in runs/
train:
	mkdir -p runs
	$(STOKE) train $(TRAINARGS)

## test: vet, the race-checked test suite (and, without the race detector, the families' training
## check it would take minutes over), the pure-Go build check, and the two variant builds:
## stoke_invariants (slot misuse panics) on the packages that move slots, noasm (the pure-Go
## fallbacks of the assembly kernels: transforms' SIMD, the GEMM, collective's reduction)
test: lint
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) build ./examples/...
	$(GO) test -race -timeout 15m ./...
	$(GO) test -run TestFamiliesEverywhere ./models/
	$(GO) test -tags stoke_invariants ./pinned/... ./gpu/... ./loaders/... ./datasets/... ./train/...
	$(GO) test -tags noasm ./transforms/... ./kernels/... ./train/... ./collective/...
	scripts/external-check.sh

## bench: the Go benchmarks of every package (one pass each)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## lint: gofmt and go vet must be clean
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## external: build and run examples/external, a separate module, and the other examples (mnist and ddp
## train one epoch), from copies outside the repository
external:
	scripts/external-check.sh

## build: the stoke binary
build:
	$(GO) build -o bin/stoke ./cmd/stoke

## cuda: build with the CUDA backend (needs the CUDA toolkit at CUDA_HOME; see README "Building with CUDA"),
## and NCCL's nccl.h at NCCL_HOME for collective/nccl (e.g. a pip nvidia-nccl-cu13's nvidia/nccl). The binaries load
## libcuda, NVRTC, cuBLAS and NCCL at run time; -L only gives gorgonia.org/cu's -lcuda and -lnvrtc a file.
CUDA_HOME ?= /usr/local/cuda
NCCL_HOME ?= $(CUDA_HOME)
CUDA_ENV   = CGO_ENABLED=1 CGO_CFLAGS="-I$(CURDIR)/internal/cudainc -I$(CUDA_HOME)/include -I$(NCCL_HOME)/include" \
             CGO_LDFLAGS="-L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib64/stubs"
cuda:
	$(CUDA_ENV) $(GO) build -tags cuda ./...

## cuda-bin: bin/stoke-cuda, the stoke binary with the CUDA backend, built against the headers cuda-check
## fetches (CUDA 13; no toolkit needed); it loads the CUDA libraries at run time, so it starts on any host
cuda-bin:
	scripts/cuda-check.sh --bin bin/stoke-cuda 13

## cuda-test: the CUDA tests (parity with the CPU ops, feeder ordering, NCCL's all-reduce); needs a GPU
cuda-test:
	$(CUDA_ENV) $(GO) test -tags cuda ./gpu/... ./pinned/... ./collective/... ./train/ ./predict/

## cuda-check: compile the cuda build against CUDA 12 and 13 headers from PyPI, without a GPU
cuda-check:
	scripts/cuda-check.sh

## cuda-sim: go test -tags cuda ./... against the CPU stand-in of the driver, the kernels, cuBLAS and NCCL
## (no GPU; GOTESTFLAGS go to go test, e.g. GOTESTFLAGS="-race -run CUDA")
CUDA_SIM_VERSIONS ?= 13
cuda-sim:
	GOTESTFLAGS="$(GOTESTFLAGS)" scripts/cuda-sim.sh $(CUDA_SIM_VERSIONS)

## cuda-sim-train: stoke bench and stoke train --device cuda (MLP, CNN, small vit, convnext, regnet
## and swin on MNIST) on the stand-in, each within 0.3 (the zoo's: 0.5) accuracy points of the CPU backend
cuda-sim-train:
	scripts/cuda-sim.sh --train $(CUDA_SIM_VERSIONS)
