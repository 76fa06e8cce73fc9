#pragma once
// The embedding program's own io/checkpoint.h (ember has one too, as <ember/io/checkpoint.h>).
#include <string>

namespace app {
inline std::string checkpoint_name() { return "app.ckpt"; }
}  // namespace app
