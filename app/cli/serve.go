package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"arborist/app/serve"
	"arborist/profiles"
	"arborist/profiles/config"
	"arborist/profiles/serving"
)

// runServe serves a config.yaml's plan behind an OpenAI-compatible HTTP
// API until SIGINT or SIGTERM (the context), then shuts down cleanly: the
// request decoding finishes (or is cancelled after --grace) and the verb
// exits 0.
func runServe(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "serve", "--config config.yaml [--host 127.0.0.1] [--port 8080] [flags]")
	cfgPath := fs.String("config", "", "the config.yaml to serve (its models, plan and sampling)")
	host := fs.String("host", "127.0.0.1", "address to listen on (0.0.0.0 or ::: every interface, said so when serving)")
	port := fs.Int("port", 8080, "port to listen on (0: a free one, printed)")
	threads := fs.Int("threads", 0, "target threads where the config names none")
	chatTemplate := fs.String("chat-template", "", "a Jinja chat template `file` used instead of the model's own")
	maxTokens := fs.Int("max-tokens", 0, "most tokens a request may ask for (default: the context)")
	defTokens := fs.Int("default-tokens", 256, "tokens a request that names no max_tokens gets")
	maxBody := fs.Int64("max-body", 1<<20, "largest request body in bytes")
	maxSeqs := fs.Int("max-seqs", serving.DefaultSeqs, "requests decoding together in one batch (1 to "+strconv.Itoa(serving.MaxSeqs)+"); more wait in the queue")
	maxQueue := fs.Int("max-queue", 64, "requests that may wait for room in the batch; more are answered 503 with Retry-After")
	policy := fs.String("policy", "", "how each running request's draft is sized before each pass: "+config.PolicyAdaptive+" (to the load, on the stored latency curve; the plan where none is stored), "+config.PolicyPlan+" (the plan's full size) or "+config.PolicyPlain+" (no drafts); default: the config's serving.policy, "+config.PolicyAdaptive+" where it names none")
	grace := fs.Duration("grace", 30*time.Second, "at shutdown, how long the request decoding may run on before it is cancelled")
	quiet := fs.Bool("quiet", false, "do not log each request on stderr")
	allowChanged := fs.Bool("allow-changed-model", false, "serve a config.yaml even if a model file's SHA-256 differs from the one it recorded")
	db := dbFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *cfgPath == "":
		return fail(fs, usagef("--config is required"))
	case *host == "":
		// net.Listen takes "" for every interface: never by omission
		return fail(fs, usagef("--host \"\" would listen on every interface: give --host 0.0.0.0 (or ::) to serve every interface, or an address such as 127.0.0.1"))
	case *port < 0 || *port > 65535:
		return fail(fs, usagef("--port %d must be in 0..65535", *port))
	case *maxTokens < 0 || *defTokens < 1 || *maxBody < 1 || *maxQueue < 1 || *grace <= 0:
		return fail(fs, usagef("--max-tokens, --default-tokens, --max-body, --max-queue and --grace must be positive"))
	}
	if *threads != 0 {
		if err := profiles.CheckThreads("--threads", *threads); err != nil {
			return fail(fs, usagef("%v", err))
		}
	}
	if err := serving.CheckMaxSeqs("--max-seqs", *maxSeqs); err != nil {
		return fail(fs, usagef("%v", err))
	}
	if *policy != "" {
		if err := serving.CheckPolicy("--policy", *policy); err != nil {
			return fail(fs, usagef("%v", err))
		}
	}
	opt := serve.Options{ServeOptions: profiles.ServeOptions{Threads: *threads, AllowChanged: *allowChanged, MaxTokens: *maxTokens, DefaultTokens: *defTokens,
		MaxQueue: *maxQueue, MaxSeqs: *maxSeqs, Policy: *policy}, MaxBody: *maxBody, Grace: *grace}
	if *chatTemplate != "" {
		t, err := profiles.ReadChatTemplate(*chatTemplate) // a regular file of bounded size
		if err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		opt.ChatTemplate = t
	}
	if !*quiet {
		var mu sync.Mutex
		opt.OnRequest = func(line string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(env.Stderr, "%s %s\n", time.Now().Format("15:04:05"), line)
		}
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	b, err := openBench(ctx, *db)
	if err != nil {
		return err
	}
	defer b.Close()
	srv, err := serve.Open(ctx, b, c, opt)
	if err != nil {
		return err
	}
	defer srv.Close()
	err = srv.ServeAddr(ctx, net.JoinHostPort(*host, strconv.Itoa(*port)), func(url string) {
		chat := "chat completions from the model's chat template"
		if *chatTemplate != "" {
			chat = "chat completions from " + *chatTemplate
		}
		if e := srv.Chat(); e != nil {
			chat = "no chat completions: " + e.Error()
		}
		where := ""
		if ip := net.ParseIP(*host); ip != nil && ip.IsUnspecified() {
			where = ", listening on every interface: reachable from other machines"
		}
		st := srv.Stats()
		fmt.Fprintf(env.Stdout, "serving %s with %s at %s/v1 (up to %d requests together, %d waiting%s; %s)\npolicy: %s\n",
			srv.Model(), st.Plan, url, st.MaxSeqs, st.MaxQueue, where, chat, srv.Policy())
	})
	if err != nil {
		return err
	}
	st := srv.Stats()
	fmt.Fprintf(env.Stderr, "stopped after %d requests (%d completed): %d tokens, %.1f tokens/s, AAL %.2f, acceptance %.1f%%\n",
		st.Requests, st.Completed, st.Totals.Tokens, st.TPS, st.AAL, 100*st.Accept)
	return nil
}
