#pragma once
// Everything of ember::optim: optimizers and learning-rate schedulers.
#include "optim/adam.h"
#include "optim/lbfgs.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
