#include "go_asm.h"
#include "textflag.h"

// MIN16 folds the least of the sixteen lanes of X0-X3 into every lane of
// X4 (X5 scratch).
#define MIN16 \
	MOVO X0, X4; PMINUD X1, X4; \
	MOVO X2, X5; PMINUD X3, X5; PMINUD X5, X4; \
	PSHUFD $0x4e, X4, X5; PMINUD X5, X4; \
	PSHUFD $0xb1, X4, X5; PMINUD X5, X4

// NONCANDIDATE sets to 0xffffffff the lanes of register r whose bit of
// the broadcast candidate mask X6, selected by X7, is clear (X8 zero, X9
// scratch).
#define NONCANDIDATE(r) \
	MOVO X6, X9; PAND X7, X9; PCMPEQL X8, X9; POR X9, r

// Lane i of slotBits0 is 1<<i: ANDed with a broadcast candidate mask and
// compared with zero, it marks the lanes of slots 0-3 that are not
// candidates; shifted left by 4 per register, those of slots 4-15.
DATA slotBits0<>+0(SB)/4, $1
DATA slotBits0<>+4(SB)/4, $2
DATA slotBits0<>+8(SB)/4, $4
DATA slotBits0<>+12(SB)/4, $8
GLOBL slotBits0<>(SB), RODATA|NOPTR, $16

// levelBits has the two level bits of a state byte, shifted down to bits
// 0-1 (levelShift = 3), in every byte.
DATA levelBits<>+0(SB)/8, $0x0303030303030303
DATA levelBits<>+8(SB)/8, $0x0303030303030303
GLOBL levelBits<>(SB), RODATA|NOPTR, $16

// ones has 1 in every byte: level 1, and ones+ones level 2.
DATA ones<>+0(SB)/8, $0x0101010101010101
DATA ones<>+8(SB)/8, $0x0101010101010101
GLOBL ones<>(SB), RODATA|NOPTR, $16

// func scanPairSIMD(b0, b1 *bucket) (lv uint64, c uint32, oldest Tick, best uint64)
//
// SSE4.1 (PMINUD). The sixteen state bytes are one register, X8, byte j
// pair slot j; the sixteen ticks are four, X0-X3, slots 0-3, 4-7, 8-11
// and 12-15.
TEXT ·scanPairSIMD(SB), NOSPLIT|NOFRAME, $0-40
	MOVQ b0+0(FP), AX
	MOVQ b1+8(FP), BX

	// lv and c: the lowest level below 3 any slot is at, and its slots.
	MOVQ bucket_state(AX), X8
	MOVQ bucket_state(BX), X9
	PUNPCKLQDQ X9, X8
	PSRLW $3, X8
	PAND levelBits<>(SB), X8
	XORL DX, DX
	PXOR X9, X9
	PCMPEQB X8, X9
	PMOVMSKB X9, CX
	TESTL CX, CX
	JNE level
	INCL DX
	MOVOU ones<>(SB), X10
	MOVO X10, X9
	PCMPEQB X8, X9
	PMOVMSKB X9, CX
	TESTL CX, CX
	JNE level
	INCL DX
	PADDB X10, X10
	PCMPEQB X8, X10
	PMOVMSKB X10, CX
	TESTL CX, CX
	JNE level
	XORL DX, DX // all proven: c is empty
level:
	MOVQ DX, lv+16(FP)
	MOVL CX, c+24(FP)

	MOVOU bucket_seen(AX), X0
	MOVOU bucket_seen+16(AX), X1
	MOVOU bucket_seen(BX), X2
	MOVOU bucket_seen+16(BX), X3

	// oldest: the least of all 16, folded into every lane of X4.
	MIN16
	MOVL X4, DX
	MOVL DX, oldest+28(FP)

	// Lanes of slots not in c become 0xffffffff, which no minimum below
	// a candidate's tick can come from; c is ANDed in at the end, so a
	// candidate's tick of 0xffffffff is still found.
	MOVL CX, X6
	PSHUFD $0, X6, X6
	MOVOU slotBits0<>(SB), X7
	PXOR X8, X8
	NONCANDIDATE(X0)
	PSLLL $4, X7
	NONCANDIDATE(X1)
	PSLLL $4, X7
	NONCANDIDATE(X2)
	PSLLL $4, X7
	NONCANDIDATE(X3)

	// The least candidate tick, in every lane of X4.
	MIN16

	// The first candidate slot holding it (none if c is empty: best is
	// then undefined, and the caller ignores it).
	PCMPEQL X4, X0
	PCMPEQL X4, X1
	PCMPEQL X4, X2
	PCMPEQL X4, X3
	MOVMSKPS X0, R8
	MOVMSKPS X1, R9
	MOVMSKPS X2, R10
	MOVMSKPS X3, R11
	SHLL $4, R9
	SHLL $8, R10
	SHLL $12, R11
	ORL R9, R8
	ORL R11, R10
	ORL R10, R8
	ANDL CX, R8
	BSFL R8, R8
	MOVL X4, DX
	SHLQ $4, DX
	ORQ R8, DX
	MOVQ DX, best+32(FP)
	RET
