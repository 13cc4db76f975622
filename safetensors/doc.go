// Package safetensors reads and writes safetensors files (https://github.com/huggingface/safetensors),
// the weights format of PyTorch's safetensors.torch.save_file and load_file: an 8-byte
// little-endian header length, a JSON header that maps each tensor's name to its dtype, shape
// and byte range in the data (data_offsets, from the end of the header) and may hold string
// metadata under "__metadata__", then the tensors' raw little-endian bytes.
//
// NewFile reads and checks a file's header; File's methods list its tensors and read them,
// converting F16 and BF16 to float32 exactly and any integer dtype to int64. Write writes float32
// (F32) and int64 (I64) tensors with metadata.
//
// # Hostile input
//
// NewFile treats the file as outside bytes. It reads the header whole, so it refuses one longer
// than the file or than 100 MB (the reference implementation's bound) before allocating it, and
// then allocates only the parsed entries. It accepts a header only when every tensor has a
// dtype of the format, non-negative dimensions whose product fits an int and matches its byte
// range, and byte ranges that tile the data exactly: no overlap, no gap, none past the end, and
// the last ending at the end of the file (the reference implementation's checks). Every such
// refusal wraps ErrFormat and says what is wrong, naming the tensor at fault where there is
// one. A tensor's read allocates its byte size, which the caller has admitted by sizing the
// destination.
//
// # Concurrency
//
// A File is safe for concurrent use when its io.ReaderAt is (as io.ReaderAt's contract asks and
// *os.File and *bytes.Reader are): it changes nothing after NewFile. Write may be called from
// several goroutines on different writers.
//
// # Ownership
//
// A File reads its io.ReaderAt on every read and does not close it: the caller keeps it open
// while the File is in use, and closes it. Tensors and Tensor return shapes the File owns, which
// the caller must not modify. Write reads its tensors and metadata and keeps nothing of them.
package safetensors
