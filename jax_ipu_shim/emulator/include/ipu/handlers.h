// The op handlers: one function per op (or per family of ops that share one vertex), over the graph-building calls
// of `Lowerer` (ipu/lowering.h), in popops-like files. Each appends the op's steps to ctx.seq and returns the slots
// of its results (an OpHandler, ipu/registry.h). The op registry names each op's handler in its row (registry.cc);
// `Lowerer` calls the row's.
#pragma once

#include <vector>

namespace ipu {

class Lowerer;
struct OpContext;

// elementwise.cc: every unary, binary, compare, select, clamp and convert op (one fused map vertex).
std::vector<int> lowerElementwise(Lowerer& lowerer, OpContext& ctx);
// shape_ops.cc: data movement (views and copies; Poplar's Tensor views and popops copies).
std::vector<int> lowerConstant(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerIota(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerBitcastConvert(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerBroadcastInDim(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerReshape(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerTranspose(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerReverse(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerSlice(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerDynamicSlice(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerDynamicUpdateSlice(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerConcatenate(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerPad(Lowerer& lowerer, OpContext& ctx);
// gather_scatter.cc: indexed reads and updates (popops multiSlice / multiUpdate)
std::vector<int> lowerGather(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerScatter(Lowerer& lowerer, OpContext& ctx);
// reduce.cc, dot.cc, conv.cc, sort.cc (sort and top_k)
std::vector<int> lowerReduce(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerDot(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerConv(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerSort(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerTopK(Lowerer& lowerer, OpContext& ctx);
// control.cc: calls inline their callee; while and case lower their regions into program nodes.
std::vector<int> lowerCall(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerWhile(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerCase(Lowerer& lowerer, OpContext& ctx);
// host_io.cc: tokens, infeed, outfeed and host callbacks
std::vector<int> lowerCreateToken(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerAfterAll(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerInfeed(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerOutfeed(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerCustomCall(Lowerer& lowerer, OpContext& ctx);
// collective.cc: over the IPU-Links between replicas (GCL's ring algorithms)
std::vector<int> lowerAllReduce(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerAllGather(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerReduceScatter(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerCollectivePermute(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerAllToAll(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerReplicaId(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerPartitionId(Lowerer& lowerer, OpContext& ctx);
// window.cc: pooling (popnn), remat barriers, reduce_precision
std::vector<int> lowerReduceWindow(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerSelectAndScatter(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerOptimizationBarrier(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerReducePrecision(Lowerer& lowerer, OpContext& ctx);
// complex.cc: real, imag, complex, and the c64 and c128 arithmetic of every elementwise op (which Lowerer sends to
// lowerComplexElementwise whatever the op); fft.cc
std::vector<int> lowerReal(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerImag(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerComplex(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerComplexElementwise(Lowerer& lowerer, OpContext& ctx);
std::vector<int> lowerFft(Lowerer& lowerer, OpContext& ctx);
// random.cc: rng (poprand's uniform and normal)
std::vector<int> lowerRng(Lowerer& lowerer, OpContext& ctx);

}  // namespace ipu
