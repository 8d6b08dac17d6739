// Written by the verifier test work in progress.
#include <gtest/gtest.h>
