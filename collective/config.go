package collective

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"
)

// Op is a reduction.
type Op uint8

// The reductions.
const (
	// Sum adds the ranks' values.
	Sum Op = iota
	// Avg adds them and divides by the world size once, at the rank that owns
	// each segment, before the values are gathered, so every rank holds the same bits.
	Avg
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	}
	return fmt.Sprintf("op %d", uint8(o))
}

// DefaultTimeout is what a zero Config.Timeout means (PyTorch's default).
const DefaultTimeout = 30 * time.Minute

// Config says where a process stands in the group and how to find the others.
type Config struct {
	// Rank is this process's place, 0 to WorldSize-1.
	Rank int
	// WorldSize is the number of processes; 0 means 1.
	WorldSize int
	// LocalRank and LocalWorldSize place the process on its machine (they pick
	// a device; the collectives do not use them). LocalWorldSize 0 means 1.
	LocalRank, LocalWorldSize int
	// Addr is MASTER_ADDR: the host of the store; "" means 127.0.0.1.
	Addr string
	// Port is MASTER_PORT, required when WorldSize > 1.
	Port int
	// Timeout bounds the rendezvous and every collective; 0 means 30 minutes
	// (PyTorch's default).
	Timeout time.Duration
	// UseAgentStore is torchrun's TORCHELASTIC_USE_AGENT_STORE=True: the agent
	// hosts a c10d TCPStore at Addr:Port and every rank joins it as a client.
	// Otherwise rank 0 hosts the store.
	UseAgentStore bool
	// RestartCount is TORCHELASTIC_RESTART_COUNT: the keys of this attempt
	// are prefixed with it so a restarted group does not read a dead one's keys.
	RestartCount int
	// Secret is STOKE_SECRET, the same on every rank: it authenticates every
	// query to rank 0's store and every ring handshake (HMAC-SHA256
	// challenge-response; it never crosses the wire). "" leaves the job open
	// to any process that reaches its ports, and rank 0 says so once.
	Secret string
	// JobID names the job: FromEnv reads torchrun's TORCHELASTIC_RUN_ID (but
	// its default, "none") or Slurm's SLURM_JOB_ID. Rank 0 publishes its own
	// (one it generates when it has none) before any rank claims a place; a
	// rank whose JobID is set and differs is refused naming both, so a rank
	// of another job that finds this job's store does not join it.
	JobID string
	// Log receives Init's warning that a job has no Secret (rank 0 only);
	// nil means the log package's standard logger.
	Log *log.Logger
}

// SecretEnv is the environment variable FromEnv reads Config.Secret from.
const SecretEnv = "STOKE_SECRET"

// String formats c with its Secret redacted, so that a logged Config does
// not leak it.
func (c Config) String() string {
	if c.Secret != "" {
		c.Secret = "[redacted]"
	}
	type fields Config // without this method
	return fmt.Sprintf("%+v", fields(c))
}

// Validate checks c without filling defaults.
func (c Config) Validate() error {
	ws := c.WorldSize
	if ws == 0 {
		ws = 1
	}
	lws := c.LocalWorldSize
	if lws == 0 {
		lws = 1
	}
	switch {
	case c.WorldSize < 0:
		return fmt.Errorf("collective: config: WorldSize %d is negative", c.WorldSize)
	case c.Rank < 0 || c.Rank >= ws:
		return fmt.Errorf("collective: config: Rank %d is outside 0..%d (WorldSize %d)", c.Rank, ws-1, ws)
	case c.LocalWorldSize < 0:
		return fmt.Errorf("collective: config: LocalWorldSize %d is negative", c.LocalWorldSize)
	case lws > ws:
		return fmt.Errorf("collective: config: LocalWorldSize %d is more than WorldSize %d", lws, ws)
	case c.LocalRank < 0 || c.LocalRank >= lws:
		return fmt.Errorf("collective: config: LocalRank %d is outside 0..%d (LocalWorldSize %d)", c.LocalRank, lws-1, lws)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("collective: config: Port %d is outside 0..65535", c.Port)
	case ws > 1 && c.Port == 0:
		return fmt.Errorf("collective: config: Port (MASTER_PORT) is required when WorldSize is %d", ws)
	case c.Timeout < 0:
		return fmt.Errorf("collective: config: Timeout %v is negative", c.Timeout)
	case c.RestartCount < 0:
		return fmt.Errorf("collective: config: RestartCount %d is negative", c.RestartCount)
	}
	return nil
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.WorldSize == 0 {
		c.WorldSize = 1
	}
	if c.LocalWorldSize == 0 {
		c.LocalWorldSize = 1
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1"
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

// FromEnv reads torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE,
// TORCHELASTIC_RESTART_COUNT) when RANK or WORLD_SIZE is set, else Slurm's
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE or
// SLURM_TASKS_PER_NODE, with MASTER_ADDR, which defaults to the first host of
// SLURM_JOB_NODELIST, and MASTER_PORT) when SLURM_PROCID is set, else a single
// process. In every case it reads Secret from STOKE_SECRET and JobID from
// TORCHELASTIC_RUN_ID or SLURM_JOB_ID. A value that does not parse, or that
// contradicts another, is an error naming the variable.
func FromEnv() (Config, error) { return fromEnv(os.LookupEnv) }

func fromEnv(look func(string) (string, bool)) (Config, error) {
	var c Config
	c.Secret, _ = look(SecretEnv)
	if v, _ := look("TORCHELASTIC_RUN_ID"); v != "" && v != "none" {
		c.JobID = v
	} else {
		c.JobID, _ = look("SLURM_JOB_ID")
	}
	num := func(name string, dst *int, required bool) error {
		v, ok := look(name)
		if !ok || v == "" {
			if required {
				return fmt.Errorf("collective: env: %s is not set", name)
			}
			return nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return fmt.Errorf("collective: env: %s=%q is not a number >= 0", name, v)
		}
		*dst = n
		return nil
	}
	_, hasRank := look("RANK")
	_, hasWorld := look("WORLD_SIZE")
	_, hasSlurm := look("SLURM_PROCID")
	var err error
	switch {
	case hasRank || hasWorld:
		for _, f := range []struct {
			name string
			dst  *int
			req  bool
		}{{"RANK", &c.Rank, true}, {"WORLD_SIZE", &c.WorldSize, true}, {"LOCAL_RANK", &c.LocalRank, false},
			{"LOCAL_WORLD_SIZE", &c.LocalWorldSize, false}, {"MASTER_PORT", &c.Port, false},
			{"TORCHELASTIC_RESTART_COUNT", &c.RestartCount, false}} {
			if err := num(f.name, f.dst, f.req); err != nil {
				return Config{}, err
			}
		}
		c.Addr, _ = look("MASTER_ADDR")
		if v, ok := look("TORCHELASTIC_USE_AGENT_STORE"); ok && v != "" {
			c.UseAgentStore, err = strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("collective: env: TORCHELASTIC_USE_AGENT_STORE=%q is not a boolean", v)
			}
		}
	case hasSlurm:
		if err := num("SLURM_PROCID", &c.Rank, true); err != nil {
			return Config{}, err
		}
		if err := num("SLURM_NTASKS", &c.WorldSize, true); err != nil {
			return Config{}, err
		}
		if err := num("SLURM_LOCALID", &c.LocalRank, false); err != nil {
			return Config{}, err
		}
		if err := num("SLURM_NTASKS_PER_NODE", &c.LocalWorldSize, false); err != nil {
			return Config{}, err
		}
		if v, ok := look("SLURM_TASKS_PER_NODE"); ok && c.LocalWorldSize == 0 && v != "" {
			node := 0
			if err := num("SLURM_NODEID", &node, false); err != nil {
				return Config{}, err
			}
			n, err := tasksPerNode(v, node)
			if err != nil {
				return Config{}, fmt.Errorf("collective: env: SLURM_TASKS_PER_NODE=%q: %w", v, err)
			}
			c.LocalWorldSize = n
		}
		if err := num("MASTER_PORT", &c.Port, true); err != nil {
			return Config{}, err
		}
		c.Addr, _ = look("MASTER_ADDR")
		if c.Addr == "" {
			v, _ := look("SLURM_JOB_NODELIST")
			if c.Addr = firstHost(v); c.Addr == "" {
				return Config{}, fmt.Errorf("collective: env: MASTER_ADDR is not set and SLURM_JOB_NODELIST=%q has no simple first host", v)
			}
		}
	default:
		return Config{WorldSize: 1, LocalWorldSize: 1, Secret: c.Secret, JobID: c.JobID}, nil
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("collective: env: %w", err)
	}
	return c, nil
}

// tasksPerNode reads Slurm's "2(x3),1" form and returns the count of node i.
func tasksPerNode(v string, i int) (int, error) {
	for _, part := range strings.Split(v, ",") {
		n, reps := part, 1
		if j := strings.IndexByte(part, '('); j >= 0 {
			r := strings.TrimSuffix(strings.TrimPrefix(part[j:], "(x"), ")")
			var err error
			if reps, err = strconv.Atoi(r); err != nil || reps < 1 || !strings.HasSuffix(part, ")") {
				return 0, fmt.Errorf("bad repeat %q", part)
			}
			n = part[:j]
		}
		k, err := strconv.Atoi(n)
		if err != nil || k < 1 {
			return 0, fmt.Errorf("bad count %q", part)
		}
		if i < reps {
			return k, nil
		}
		i -= reps
	}
	return 0, fmt.Errorf("no entry for node %d", i)
}

// firstHost returns the first host of a Slurm node list ("node[01-04,07],gpu1"
// gives "node01"), or "" for a form it does not know.
func firstHost(list string) string {
	list = strings.TrimSpace(list)
	if list == "" {
		return ""
	}
	br := strings.IndexByte(list, '[')
	comma := strings.IndexByte(list, ',')
	if br < 0 || (comma >= 0 && comma < br) {
		if comma >= 0 {
			return list[:comma]
		}
		return list
	}
	end := strings.IndexByte(list[br:], ']')
	if end < 0 {
		return ""
	}
	first := list[br+1 : br+end]
	if k := strings.IndexAny(first, ",-"); k >= 0 {
		first = first[:k]
	}
	if first == "" || strings.Trim(first, "0123456789") != "" {
		return ""
	}
	rest := list[br+end+1:]
	if rest != "" && rest[0] != ',' {
		return "" // a suffix after the range: not a simple form
	}
	return list[:br] + first
}
