// Package serving holds what a face hands Arborist's server and the
// bounds it checks before any model is opened: a request to decode (its
// prompt, budget, sampling and stop sequences) with its chat messages,
// the refusal of one (RequestError, which a face maps onto its protocol),
// how many requests one batch decodes at once, and the serving policies a
// server takes. The server itself (profiles.Server) is the core's.
package serving

import (
	"fmt"
	"strings"

	"arborist/engine/model"
	"arborist/engine/spec"
	"arborist/profiles/config"
)

// policies are the policies a server takes (profiles.ServeOptions.Policy;
// config's Policy*), the default first.
func policies() []string {
	return []string{config.PolicyAdaptive, config.PolicyPlan, config.PolicyPlain}
}

// DefaultSeqs is how many requests a server decodes at once by default.
const DefaultSeqs = spec.DefaultMaxSeqs

// MaxSeqs is the most requests one batch can run at once: each is at
// least one row of a pass, and a pass holds at most model.MaxRows rows.
const MaxSeqs = model.MaxRows

// CheckMaxSeqs refuses a count of requests decoding at once that no
// machine runs in one batch, naming the flag: at least 1, at most
// MaxSeqs. profiles.Bench.OpenServer checks it against the KV budget too.
func CheckMaxSeqs(flag string, n int) error {
	if n < 1 || n > MaxSeqs {
		return fmt.Errorf("%s %d: want 1 to %d (a pass holds at most %d rows, one a request at least)", flag, n, MaxSeqs, model.MaxRows)
	}
	return nil
}

// CheckPolicy refuses a policy name the server does not know.
func CheckPolicy(flag, name string) error {
	for _, p := range policies() {
		if name == p {
			return nil
		}
	}
	return fmt.Errorf("%s %q: want %s", flag, name, strings.Join(policies(), ", "))
}

// Request is one request to decode: its prompt, budget, sampling and
// stop sequences, and callbacks for the decoding's start and its text.
type Request struct {
	// Chat renders Messages with the chat template as the prompt; else
	// the prompt is IDs (token ids as given) where not nil, or Text
	// (encoded with BOS).
	Chat     bool
	Messages []Message
	IDs      []int
	Text     string
	// MaxTokens is the most tokens to decode (0: the server's default,
	// at most the room the prompt leaves).
	MaxTokens int
	// Sampling: the config's, each field given here overriding it. A
	// request without a seed that samples draws afresh, reproducibly per
	// server run.
	Temperature, TopP, MinP *float64
	TopK                    *int // -1: every token
	Seed                    *int64
	// Stop are up to 16 stop sequences of up to 256 bytes each: the text
	// ends before the first one found ("" are ignored).
	Stop []string
	// OnStart, when set, is called once the request runs (it left the
	// queue for the batch), before its text, with its number (counted
	// from 1 in the order requests were queued, which is the order they
	// run in).
	OnStart func(seq int64)
	// OnText, when set, receives the text as it is decoded: whole UTF-8
	// characters, never past a stop sequence. OnStart and OnText are
	// called on Complete's goroutine, never the batch's: a slow client
	// delays only its own text.
	OnText func(string)
	// OnFlush, when set, is called after the OnText calls that carry the
	// tokens of one pass (on the same goroutine): a streaming server
	// writes each text event as OnText gives it and sends them on
	// together here, one write to the client a pass rather than one a
	// token (a system call each, which on two cores took a pass's worker
	// off its core: 9-11% of a pass at one client).
	OnFlush func()
}

// Message is one chat message.
type Message struct {
	Role, Content, Name string
}

// RequestError is a request the server refuses: the field at fault
// (Param, "" for none), a code naming what is wrong (invalid_value,
// invalid_type, missing_required_parameter, context_length_exceeded,
// no_chat_template, chat_template_error; server_busy when the queue is
// full or the server is draining, tokens_in_flight when the tokens the
// requests in flight reserve would pass the server's bound) and a message
// naming the bound. Busy says a client may retry it later.
type RequestError struct {
	Param, Code, Message string
	Busy                 bool
}

func (e *RequestError) Error() string { return e.Message }
