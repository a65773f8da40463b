/* SPDX-License-Identifier: MIT */
/*
 * void weft__fiber_switch(weft__fiber_ctx_t *from, weft__fiber_ctx_t *to)
 *
 * Saves the callee-saved registers of the System V x86-64 ABI (rbx, rbp,
 * r12-r15, and the MXCSR and x87 control words) on the current stack,
 * stores the stack pointer in *from, loads *to's and restores the same
 * registers from there.  The caller-saved rest is the compiler's business:
 * to it this is an ordinary call.
 *
 * A new fiber's stack is laid out by fiber.c to look as if it had
 * switched away: 8 bytes of MXCSR/FPU control, r15..rbp, then the address
 * of weft__fiber_start, which the final `ret` jumps to.
 */
	.text
	.globl	weft__fiber_switch
	.hidden	weft__fiber_switch
	.type	weft__fiber_switch, @function
	.p2align 4
weft__fiber_switch:
	.cfi_startproc
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
	movq	(%rsi), %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret
	.cfi_endproc
	.size	weft__fiber_switch, .-weft__fiber_switch

/*
 * First instruction of every fiber: entered by `ret` with the stack
 * 16-byte aligned and the fiber in r12.  weft__fiber_main never returns.
 */
	.globl	weft__fiber_start
	.hidden	weft__fiber_start
	.type	weft__fiber_start, @function
	.p2align 4
weft__fiber_start:
	.cfi_startproc
	.cfi_undefined rip
	movq	%r12, %rdi
	call	weft__fiber_main
	ud2
	.cfi_endproc
	.size	weft__fiber_start, .-weft__fiber_start

	.section .note.GNU-stack,"",@progbits
