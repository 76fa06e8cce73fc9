#pragma once
// Everything of ember::nn: modules, layers, losses, init, utils and parallel wrappers.
#include "ember/nn/functional.h"
#include "ember/nn/init.h"
#include "ember/nn/module.h"
#include "ember/nn/modules/activation.h"
#include "ember/nn/modules/container.h"
#include "ember/nn/modules/conv_pool.h"
#include "ember/nn/modules/linear.h"
#include "ember/nn/modules/loss.h"
#include "ember/nn/modules/norm.h"
#include "ember/nn/modules/transformer.h"
#include "ember/nn/parallel/distributed.h"
#include "ember/nn/utils.h"
