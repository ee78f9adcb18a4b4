#include "transports/ibverbs/credits.h"

namespace weft {
namespace ib {

bool CreditWindow::takeForData() {
  if (credits_ <= 1) return false;
  --credits_;
  return true;
}

bool CreditWindow::takeForCreditReturn() {
  if (credits_ == 0) return false;
  --credits_;
  return true;
}

}  // namespace ib
}  // namespace weft
