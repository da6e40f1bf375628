#include "gui/chart_table.h"

#include <cmath>

namespace netloom::gui {

bool accuracyOf(const google::protobuf::Map<std::string, double>& m, double& v) {
  if (m.empty()) return false;
  auto it = m.find("accuracy");
  v = it != m.end() ? it->second : m.begin()->second;
  return true;
}

const std::vector<ChartDesc>& chartTable() {
  static const std::vector<ChartDesc> table = {
      // Under fp16's loss scaling, the steps skipped so far on the right.
      {.title = QT_TR_NOOP("Training loss"),
       .y = QT_TR_NOOP("loss"),
       .y2 = QT_TR_NOOP("steps skipped (fp16)"),
       .curves = {{.name = QT_TR_NOOP("loss"),
                   .color = kRaw,
                   .step =
                       [](const proto::Step& s, int, double& y) {
                         y = s.loss();
                         return true;
                       }},
                  {.name = QT_TR_NOOP("steps skipped (fp16)"),
                   .color = kTest,
                   .step =
                       [](const proto::Step& s, int, double& y) {
                         y = double(s.skipped_steps());
                         return s.loss_scale() > 0;
                       },
                   .right = true}},
       .smooth = true},
      {.title = QT_TR_NOOP("Evaluation"),
       .y = QT_TR_NOOP("loss"),
       .y2 = QT_TR_NOOP("accuracy"),
       .curves = {{.name = QT_TR_NOOP("validation loss"),
                   .color = kVal,
                   .epoch = [](const proto::Epoch& e,
                               double& y) { return e.has_val() && ((y = e.val_loss()), true); }},
                  {.name = QT_TR_NOOP("test loss"),
                   .color = kTest,
                   .epoch = [](const proto::Epoch& e,
                               double& y) { return e.has_test() && ((y = e.test_loss()), true); }},
                  {.name = QT_TR_NOOP("test accuracy"),
                   .color = kAccuracy,
                   .epoch =
                       [](const proto::Epoch& e, double& y) {
                         return (e.has_test() && accuracyOf(e.test_metrics(), y)) ||
                                (e.has_val() && accuracyOf(e.val_metrics(), y));
                       },
                   .right = true}},
       .legend = true},
      // Under fp16's loss scaling, the scale on the right, in powers of two.
      {.title = QT_TR_NOOP("Learning rate"),
       .y = QT_TR_NOOP("lr"),
       .y2 = QT_TR_NOOP("log₂ loss scale (fp16)"),
       .curves = {{.name = QT_TR_NOOP("lr"),
                   .color = kSmooth,
                   .step =
                       [](const proto::Step& s, int, double& y) {
                         y = s.lr();
                         return true;
                       }},
                  {.name = QT_TR_NOOP("log₂ loss scale"),
                   .color = kTest,
                   .step =
                       [](const proto::Step& s, int, double& y) {
                         y = std::log2(s.loss_scale());
                         return s.loss_scale() > 0;
                       },
                   .right = true}}},
      // A data-parallel run's own curves: each rank's samples/s, and the share of
      // time spent waiting for gradient sums.
      {.title = QT_TR_NOOP("Throughput"),
       .y = QT_TR_NOOP("samples/s"),
       .y2 = QT_TR_NOOP("waiting for gradient sums, %"),
       .y2Max = 100,
       .curves = {{.name = QT_TR_NOOP("samples/s"),
                   .color = kSmooth,
                   .step =
                       [](const proto::Step& s, int, double& y) {
                         y = s.samples_per_sec();
                         return true;
                       }},
                  {.name = QT_TR_NOOP("samples/s per rank"),
                   .color = kVal,
                   .step =
                       [](const proto::Step& s, int ranks, double& y) {
                         y = s.samples_per_sec() / ranks;
                         return ranks > 1;
                       }},
                  {.name = QT_TR_NOOP("waiting for gradient sums, %"),
                   .color = kTest,
                   .step =
                       [](const proto::Step& s, int ranks, double& y) {
                         y = 100.0 * s.comm_share();
                         return ranks > 1;
                       },
                   .right = true}}},
      {.title = QT_TR_NOOP("Gradient norm per layer"),
       .y = "‖∇w‖",
       .family = &proto::Step::grad_norms},
      {.title = QT_TR_NOOP("Weight norm per layer"),
       .y = "‖w‖",
       .family = &proto::Step::weight_norms},
      {.title = QT_TR_NOOP("Gradient distribution"),
       .y = "∇w",
       .distributions = &proto::Step::grad_histograms},
      {.title = QT_TR_NOOP("Weight distribution"),
       .y = "w",
       .distributions = &proto::Step::weight_histograms},
  };
  return table;
}

}  // namespace netloom::gui
