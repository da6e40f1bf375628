// The conversions netloom-train does instead of training: ONNX export and import,
// and PyTorch code export.
#pragma once

namespace netloom::cli {

// -1 when the command line asks for no conversion; otherwise the exit code of the
// one it asks for (0 done, 2 refused, with the reason on stderr).
int runConversion(int argc, char** argv);

}  // namespace netloom::cli
