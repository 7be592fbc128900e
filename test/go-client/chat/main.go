// Command chat is the README's "Use it from a runtime" example (chat.mjs, chat.py) in Go, written
// against stubs generated from proto/contextd/v1 alone: it appends a user message to a session
// with an idempotency key, assembles the context within a token budget, and prints the engine
// that served it, the mode, the token estimate and the message count, e.g.
//
//	legacy MODE_NORMAL 12 1
//
// Running it again prints the same: the idempotency key makes the repeated append write nothing.
//
// Build it (test/go-client/go-client.test.ts does this) from the stubs of protoc-gen-go and
// protoc-gen-go-grpc, which land at the files' go_package path,
// github.com/contextd/contextd/gen/go/contextd/v1. Offline with Debian's packages (golang-go,
// protoc-gen-go, protoc-gen-go-grpc, golang-google-grpc-dev), in GOPATH mode:
//
//	protoc -I proto --go_out=$GOPATH_DIR/src --go-grpc_out=$GOPATH_DIR/src proto/contextd/v1/*.proto
//	GO111MODULE=off GOPATH=$GOPATH_DIR:/usr/share/gocode go build -o chat ./test/go-client/chat
//
// In module mode, put the stubs in a module of that path and `replace` it to their directory.
// Only grpc-go API that Debian's grpc-go 1.33 has is used (grpc.WithInsecure, not the later
// credentials/insecure package).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/go/contextd/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func main() {
	address := flag.String("address", "127.0.0.1:50051", "contextd's gRPC address (host:port)")
	flag.Parse()
	if err := run(*address, os.Getenv("CONTEXTD_RUNTIME_TOKEN")); err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

func run(address, token string) error {
	conn, err := grpc.Dial(address, grpc.WithInsecure())
	if err != nil {
		return err
	}
	defer conn.Close()
	cx := contextdv1.NewSessionServiceClient(conn)

	// Credentials travel as metadata; without auth (auth.required: false) none is needed.
	base := context.Background()
	if token != "" {
		base = metadata.AppendToOutgoingContext(base, "authorization", "Bearer "+token)
	}
	session := &contextdv1.SessionRef{SessionId: "chat-go", AgentId: "coder"}

	// An idempotency key makes the append safe to retry: a repeat writes nothing and answers the
	// first one. A repeat must send the same messages (a timestamp set anew on each try would make
	// it another request, ALREADY_EXISTS), so this one carries none.
	turn := []*contextdv1.Message{{
		Role: contextdv1.Role_ROLE_USER,
		Content: []*contextdv1.ContentBlock{{
			Block: &contextdv1.ContentBlock_Text{Text: &contextdv1.TextBlock{Text: "Fix the failing test in src/app.go"}},
		}},
	}}
	ctx, cancel := context.WithTimeout(base, 30*time.Second)
	defer cancel()
	if _, err := cx.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{
		Session:        session,
		Messages:       turn,
		IdempotencyKey: "chat-go/turn-1",
	}); err != nil {
		return fmt.Errorf("AppendMessages: %w", err)
	}

	// Every call carries a deadline: the host bounds the engine's work by it.
	actx, acancel := context.WithTimeout(base, 10*time.Second)
	defer acancel()
	assembled, err := cx.Assemble(actx, &contextdv1.AssembleRequest{Session: session, TokenBudget: 32000})
	if err != nil {
		return fmt.Errorf("Assemble: %w", err)
	}
	fmt.Println(assembled.EngineId, assembled.Mode, assembled.EstimatedTokens, len(assembled.Messages))
	return nil
}
