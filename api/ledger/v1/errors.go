package ledger

import (
	"errors"
	"fmt"
)

// Codespace is the codespace of every error code the ledger returns.
const Codespace = "berth"

// Code is the ABCI result code of a rejected transaction or query. 0 is success. The
// numbers are part of the wire contract: never renumber.
type Code uint32

// Result codes.
const (
	CodeOK                Code = 0
	CodeInternal          Code = 1
	CodeTxDecode          Code = 2  // the bytes are not a transaction
	CodeTxTooLarge        Code = 3  // over max_tx_bytes or max_msgs_per_tx
	CodeWrongChain        Code = 4  // signed for another chain
	CodeUnauthorized      Code = 5  // bad signature, key does not match the signer
	CodeWrongSequence     Code = 6  // the account sequence is not the next one
	CodeUnknownAccount    Code = 7  // the signer has no account (never funded)
	CodeInvalidMsg        Code = 8  // a message is malformed
	CodeInsufficientFunds Code = 9  // not enough balance
	CodeNotFound          Code = 10 // the deployment, order, bid, … does not exist
	CodeAlreadyExists     Code = 11 // the ID is taken
	CodeInvalidState      Code = 12 // the object is not in a state that allows this
	CodeNotPermitted      Code = 13 // the signer is not allowed (not the owner, not the provider)
	CodePriceTooHigh      Code = 14 // bid above the group's price
	CodeTooManyBids       Code = 15 // the order has max_bids_per_order bids
	CodeRequirements      Code = 16 // the provider does not meet the group's requirements
	CodeUnknownProvider   Code = 17 // the signer is not a registered provider
	CodeBadQuery          Code = 18 // unknown query path or malformed query
)

var codeNames = map[Code]string{
	CodeOK: "ok", CodeInternal: "internal", CodeTxDecode: "tx_decode", CodeTxTooLarge: "tx_too_large",
	CodeWrongChain: "wrong_chain", CodeUnauthorized: "unauthorized", CodeWrongSequence: "wrong_sequence",
	CodeUnknownAccount: "unknown_account", CodeInvalidMsg: "invalid_msg",
	CodeInsufficientFunds: "insufficient_funds", CodeNotFound: "not_found",
	CodeAlreadyExists: "already_exists", CodeInvalidState: "invalid_state",
	CodeNotPermitted: "not_permitted", CodePriceTooHigh: "price_too_high",
	CodeTooManyBids: "too_many_bids", CodeRequirements: "requirements_not_met",
	CodeUnknownProvider: "unknown_provider", CodeBadQuery: "bad_query",
}

func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("code_%d", uint32(c))
}

// Error is a ledger error with its code. errors.Is(err, ErrNotFound) and the like
// compare codes.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Msg }

// Is matches any *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrInternal          = &Error{Code: CodeInternal}
	ErrTxDecode          = &Error{Code: CodeTxDecode}
	ErrTxTooLarge        = &Error{Code: CodeTxTooLarge}
	ErrWrongChain        = &Error{Code: CodeWrongChain}
	ErrUnauthorized      = &Error{Code: CodeUnauthorized}
	ErrWrongSequence     = &Error{Code: CodeWrongSequence}
	ErrUnknownAccount    = &Error{Code: CodeUnknownAccount}
	ErrInvalidMsg        = &Error{Code: CodeInvalidMsg}
	ErrInsufficientFunds = &Error{Code: CodeInsufficientFunds}
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrAlreadyExists     = &Error{Code: CodeAlreadyExists}
	ErrInvalidState      = &Error{Code: CodeInvalidState}
	ErrNotPermitted      = &Error{Code: CodeNotPermitted}
	ErrPriceTooHigh      = &Error{Code: CodePriceTooHigh}
	ErrTooManyBids       = &Error{Code: CodeTooManyBids}
	ErrRequirements      = &Error{Code: CodeRequirements}
	ErrUnknownProvider   = &Error{Code: CodeUnknownProvider}
	ErrBadQuery          = &Error{Code: CodeBadQuery}
)

// Errorf makes a ledger error with code c.
func Errorf(c Code, format string, args ...any) error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// Within says where an error happened ("msgs[2] (market/create-bid)") and keeps its
// code, so the result reads "invalid_state: msgs[2] (market/create-bid): order … is
// closed" rather than repeating the code.
func Within(err error, format string, args ...any) error {
	where := fmt.Sprintf(format, args...)
	var e *Error
	if errors.As(err, &e) {
		return &Error{Code: e.Code, Msg: where + ": " + e.Msg}
	}
	return &Error{Code: CodeInternal, Msg: where + ": " + err.Error()}
}

// CodeOf returns the code of err: CodeOK for nil, CodeInternal when err carries none.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorFromCode rebuilds the error a client receives as (code, log).
func ErrorFromCode(code uint32, codespace, log string) error {
	if code == 0 {
		return nil
	}
	if codespace != Codespace {
		return fmt.Errorf("%s code %d: %s", codespace, code, log)
	}
	return &Error{Code: Code(code), Msg: trimCodePrefix(Code(code), log)}
}

func trimCodePrefix(c Code, log string) string {
	p := c.String() + ": "
	if len(log) >= len(p) && log[:len(p)] == p {
		return log[len(p):]
	}
	return log
}

// ExpectedSequence reads the sequence a wrong_sequence error says the account expects.
func ExpectedSequence(err error) (uint64, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeWrongSequence {
		return 0, false
	}
	var signer string
	var want, got uint64
	if _, err := fmt.Sscanf(e.Msg, "account %s expected sequence %d, got %d", &signer, &want, &got); err != nil {
		return 0, false
	}
	return want, true
}
