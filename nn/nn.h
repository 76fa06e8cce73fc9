#pragma once
// Everything of ember::nn: modules, layers, losses, init and utils.
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/module.h"
#include "nn/modules/activation.h"
#include "nn/modules/container.h"
#include "nn/modules/conv_pool.h"
#include "nn/modules/linear.h"
#include "nn/modules/loss.h"
#include "nn/modules/norm.h"
#include "nn/modules/transformer.h"
#include "nn/utils.h"
