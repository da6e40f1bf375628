#include "engine/ops/optimizer_settings.h"

#include <cmath>

namespace netloom {

Result<OptimizerSettings> optimizerSettings(const proto::Optimizer& opt) {
  OptimizerSettings s;
  s.kind = opt.kind() == proto::Optimizer::KIND_UNSPECIFIED ? proto::Optimizer::ADAM : opt.kind();
  s.lr = opt.has_lr() ? opt.lr() : (s.kind == proto::Optimizer::SGD ? 0.01 : 1e-3);
  s.momentum = opt.momentum();
  s.nesterov = opt.nesterov();
  if (opt.has_beta1()) s.beta1 = opt.beta1();
  if (opt.has_beta2()) s.beta2 = opt.beta2();
  if (opt.has_eps()) s.eps = opt.eps();
  s.weightDecay = opt.has_weight_decay() ? opt.weight_decay()
                                         : (s.kind == proto::Optimizer::ADAMW ? 0.01 : 0.0);
  // As torch.optim: what it refuses is an error; lr 0, momentum of 1 or more and
  // weight decay above 1 are allowed (checkProject warns about them).
  if (!proto::Optimizer::Kind_IsValid(s.kind))
    return makeError("train.optimizer.kind: " + std::to_string(int(s.kind)) +
                     " is not a known optimizer (SGD, ADAM, ADAMW)");
  if (!(s.lr >= 0) || !std::isfinite(s.lr))
    return makeError("train.optimizer.lr must be a finite number of at least 0");
  if (!(s.momentum >= 0) || !std::isfinite(s.momentum))
    return makeError("train.optimizer.momentum must be a finite number of at least 0");
  if (s.nesterov && s.momentum == 0)
    return makeError("train.optimizer.nesterov needs momentum > 0");
  if (!(s.beta1 >= 0 && s.beta1 < 1 && s.beta2 >= 0 && s.beta2 < 1))
    return makeError("train.optimizer.beta1 and beta2 must be in [0, 1)");
  if (!(s.eps >= 0) || !std::isfinite(s.eps))
    return makeError("train.optimizer.eps must be a finite number of at least 0");
  if (!(s.weightDecay >= 0) || !std::isfinite(s.weightDecay))
    return makeError("train.optimizer.weight_decay must be a finite number of at least 0");
  return s;
}

}  // namespace netloom
