#pragma once
// Everything of ember::optim: optimizers, learning-rate schedulers and the loss scaler (ember::amp).
#include "ember/optim/adagrad.h"
#include "ember/optim/adam.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/lbfgs.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/optim/master_weights.h"
#include "ember/optim/optimizer.h"
#include "ember/optim/rmsprop.h"
#include "ember/optim/sgd.h"
