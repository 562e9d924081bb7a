"""Hand-written PTX kernels for the assembler, driver and launcher tests.

They are written by hand, not generated, so that these tests do not depend on the code
generator; they use only sm_80 instructions, so one text assembles for sm_80 and sm_90a.
"""

# out[i] = x[i] + y[i] for i < n; one element per thread.
VECTOR_ADD = """\
.version 8.0
.target sm_80
.address_size 64

.visible .entry add_kernel(
	.param .u64 add_kernel_param_0,
	.param .u64 add_kernel_param_1,
	.param .u64 add_kernel_param_2,
	.param .u32 add_kernel_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	.reg .f32 	%f<4>;
	.reg .b64 	%rd<11>;

	ld.param.u64 	%rd1, [add_kernel_param_0];
	ld.param.u64 	%rd2, [add_kernel_param_1];
	ld.param.u64 	%rd3, [add_kernel_param_2];
	ld.param.u32 	%r2, [add_kernel_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.f32 	%f1, [%rd8];
	ld.global.f32 	%f2, [%rd6];
	add.f32 	%f3, %f2, %f1;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;
$L__BB0_2:
	ret;
}
"""

#: The line of VECTOR_ADD (1-based) that BROKEN_VECTOR_ADD breaks.
BROKEN_LINE = 34
BROKEN_VECTOR_ADD = VECTOR_ADD.replace("add.f32 	%f3, %f2, %f1;", "add.f32 	%f3, %f2, %bogus;")
assert BROKEN_VECTOR_ADD.splitlines()[BROKEN_LINE - 1].strip() == "add.f32 	%f3, %f2, %bogus;"

# Every scalar parameter type, stored as its raw bits zero-extended to 64 bits:
# out[0..8] = i8, i16, i32, i64, f16, bf16, f32, f64, i1.  Checks the packing end to end.
SCALARS = """\
.version 8.0
.target sm_80
.address_size 64

.visible .entry scalars(
	.param .u64 scalars_param_0,
	.param .b8 scalars_param_1,
	.param .b16 scalars_param_2,
	.param .b32 scalars_param_3,
	.param .b64 scalars_param_4,
	.param .b16 scalars_param_5,
	.param .b16 scalars_param_6,
	.param .b32 scalars_param_7,
	.param .b64 scalars_param_8,
	.param .b8 scalars_param_9
)
{
	.reg .b16 	%rs<6>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<12>;

	ld.param.u64 	%rd1, [scalars_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	ld.param.u8 	%rs1, [scalars_param_1];
	cvt.u64.u16 	%rd2, %rs1;
	st.global.u64 	[%rd1], %rd2;
	ld.param.b16 	%rs2, [scalars_param_2];
	cvt.u64.u16 	%rd3, %rs2;
	st.global.u64 	[%rd1+8], %rd3;
	ld.param.b32 	%r1, [scalars_param_3];
	cvt.u64.u32 	%rd4, %r1;
	st.global.u64 	[%rd1+16], %rd4;
	ld.param.b64 	%rd5, [scalars_param_4];
	st.global.u64 	[%rd1+24], %rd5;
	ld.param.b16 	%rs3, [scalars_param_5];
	cvt.u64.u16 	%rd6, %rs3;
	st.global.u64 	[%rd1+32], %rd6;
	ld.param.b16 	%rs4, [scalars_param_6];
	cvt.u64.u16 	%rd7, %rs4;
	st.global.u64 	[%rd1+40], %rd7;
	ld.param.b32 	%r2, [scalars_param_7];
	cvt.u64.u32 	%rd8, %r2;
	st.global.u64 	[%rd1+48], %rd8;
	ld.param.b64 	%rd9, [scalars_param_8];
	st.global.u64 	[%rd1+56], %rd9;
	ld.param.u8 	%rs5, [scalars_param_9];
	cvt.u64.u16 	%rd10, %rs5;
	st.global.u64 	[%rd1+64], %rd10;
	ret;
}
"""

# Thread 0 writes 42 at the last word of the dynamic shared memory, then every thread
# reads it back and thread 0 stores it to out[0]; the last word lies past 48 KB when the
# launch asks for more, so the kernel fails unless the opt-in worked.
DYNAMIC_SHARED = """\
.version 8.0
.target sm_80
.address_size 64

.extern .shared .align 16 .b8 dynamic_smem[];

.visible .entry shared_probe(
	.param .u64 shared_probe_param_0,
	.param .u32 shared_probe_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [shared_probe_param_0];
	cvta.to.global.u64 	%rd1, %rd1;
	ld.param.u32 	%r1, [shared_probe_param_1];
	sub.s32 	%r2, %r1, 4;
	mov.u32 	%r3, dynamic_smem;
	add.s32 	%r4, %r3, %r2;
	mov.u32 	%r5, %tid.x;
	setp.ne.s32 	%p1, %r5, 0;
	@%p1 bra 	$L__wait;
	mov.u32 	%r2, 42;
	st.shared.u32 	[%r4], %r2;
$L__wait:
	bar.sync 	0;
	@%p1 bra 	$L__done;
	ld.shared.u32 	%r2, [%r4];
	st.global.u32 	[%rd1], %r2;
$L__done:
	ret;
}
"""


# Warp groups that move registers (what a warp-specialised loop does): 3 warp groups,
# the first two take 232 registers, the third gives back to 40.  sm_90a only.
SETMAXNREG = """\
.version 8.0
.target sm_90a
.address_size 64

.visible .entry ws_kernel(
	.param .u64 ws_kernel_param_0
)
.maxntid 384, 1, 1
.maxnreg 168
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [ws_kernel_param_0];
	mov.u32 	%r1, %tid.x;
	setp.lt.u32 	%p1, %r1, 256;
	@%p1 bra 	$CONSUMER;
	setmaxnreg.dec.sync.aligned.u32 40;
	ret;
$CONSUMER:
	setmaxnreg.inc.sync.aligned.u32 232;
	cvta.to.global.u64 	%rd2, %rd1;
	st.global.u32 	[%rd2], %r1;
	ret;
}
"""
