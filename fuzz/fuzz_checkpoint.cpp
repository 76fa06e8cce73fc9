// libFuzzer target: a training checkpoint's header and metadata (Note [Training checkpoints])
// on arbitrary bytes: the safetensors header parser, then the checkpoint metadata parser that
// load_checkpoint runs before it changes anything. Any outcome other than parsed metadata or
// an ember::Error (a crash, a sanitizer report, another exception type, a hang) is a bug.
// Seeds: fuzz/corpus/checkpoint/ (real checkpoints of train_mnist and of a small run).
#include <cstddef>
#include <cstdint>

#include "ember/io/checkpoint_format.h"
#include "ember/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = ember::io::parse_safetensors_header(data, size, "fuzz input");
    const auto meta = ember::io::parse_checkpoint_metadata(header.metadata, "fuzz input");
    if (meta.has_loader && (meta.loader_epoch < 0 || meta.loader_batch < 0)) __builtin_trap();
    if (meta.format < 1 || meta.format > ember::io::kCheckpointFormat) __builtin_trap();
  } catch (const ember::Error&) {
  }
  return 0;
}
