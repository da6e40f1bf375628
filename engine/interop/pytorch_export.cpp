// exportPytorch: generates every file's text first and writes only when all of it
// exists, each file through a temporary name, so a refused project leaves the
// folder as it was.
#include "engine/interop/pytorch_export.h"

#include <filesystem>
#include <fstream>

#include "engine/graph/data_labels.h"
#include "engine/interop/pytorch_gen.h"

namespace netloom {

namespace {

Status writeText(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return makeError("cannot write '" + tmp.string() + "'");
    f << text;
    if (!f.flush()) return makeError("cannot write '" + tmp.string() + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return makeError("cannot write '" + path.string() + "': " + ec.message());
  return {};
}

}  // namespace

Status exportPytorch(const proto::Project& drawn, const std::string& projectDir,
                     const std::string& outDir) {
  // The labels a loss reads by default become the input the generated code feeds.
  proto::Project project = drawn;
  *project.mutable_model() = withDataLabels(drawn.model());
  auto model = pytorch::generateModel(project);
  if (!model) return makeError("PyTorch export: " + model.error().message);
  auto train = pytorch::generateTrain(project, projectDir, *model);
  if (!train) return makeError("PyTorch export: " + train.error().message);
  std::string readme =
      "# " + (project.name().empty() ? model->className : project.name()) +
      " in PyTorch\n\n"
      "`model.py` holds the model (`build_model()`, `load_weights(model, \"run.safetensors\")`"
      " loads a NetLoom run's weights strictly); `python3 train.py --epochs 1` trains it as "
      "NetLoom would (`--max-steps`, `--train-limit`, `--test-limit`, `--weights F`, `--save F`"
      "; see `--help`).\n";
  if (project.data().has_image_folder() || project.data().has_image_list())
    readme +=
        "\nThe images are read with Pillow and numpy (Debian: `apt-get install python3-pil "
        "python3-numpy`), in NetLoom's order and split, and resized as NetLoom resizes them; "
        "`--dump-first-batch F` writes the first training batch to compare.\n";

  std::error_code ec;
  std::filesystem::create_directories(outDir, ec);
  if (ec) return makeError("PyTorch export: cannot make '" + outDir + "': " + ec.message());
  const std::filesystem::path dir(outDir);
  if (Status st = writeText(dir / "model.py", model->text); !st) return st;
  if (Status st = writeText(dir / "train.py", *train); !st) return st;
  return writeText(dir / "README.md", readme);
}

}  // namespace netloom
