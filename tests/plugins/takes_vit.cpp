#define NAME "vit"
#include "takes_mlp.cpp"
