package collective

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Config
		err  string
	}{
		{"single", nil, Config{WorldSize: 1, LocalWorldSize: 1}, ""},
		{"torchrun", map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h0",
			"MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "2"},
			Config{Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, Addr: "h0", Port: 29500, UseAgentStore: true, RestartCount: 2}, ""},
		{"rank-too-big", map[string]string{"RANK": "4", "WORLD_SIZE": "4", "MASTER_PORT": "1"}, Config{}, "Rank 4"},
		{"no-world", map[string]string{"RANK": "0"}, Config{}, "WORLD_SIZE is not set"},
		{"bad-rank", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, Config{}, "RANK=\"x\""},
		{"bad-agent", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1", "TORCHELASTIC_USE_AGENT_STORE": "maybe"},
			Config{}, "TORCHELASTIC_USE_AGENT_STORE"},
		{"no-port", map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, Config{}, "MASTER_PORT"},
		{"local-too-big", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"}, Config{}, "LocalRank 2"},
		{"slurm", map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "4(x2)",
			"SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "gpu[07-08]", "MASTER_PORT": "12345"},
			Config{Rank: 5, WorldSize: 8, LocalRank: 1, LocalWorldSize: 4, Addr: "gpu07", Port: 12345}, ""},
		{"slurm-uneven", map[string]string{"SLURM_PROCID": "4", "SLURM_NTASKS": "5", "SLURM_TASKS_PER_NODE": "2(x2),1",
			"SLURM_NODEID": "2", "MASTER_ADDR": "m", "MASTER_PORT": "1"},
			Config{Rank: 4, WorldSize: 5, LocalWorldSize: 1, Addr: "m", Port: 1}, ""},
		{"slurm-list", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "a1,b2", "MASTER_PORT": "1"},
			Config{WorldSize: 2, Addr: "a1", Port: 1}, ""},
		{"slurm-odd-list", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "n[a-b]", "MASTER_PORT": "1"},
			Config{}, "SLURM_JOB_NODELIST"},
		{"slurm-tasks", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_TASKS_PER_NODE": "2(x",
			"MASTER_ADDR": "m", "MASTER_PORT": "1"},
			Config{}, "SLURM_TASKS_PER_NODE"},
		{"slurm-no-ntasks", map[string]string{"SLURM_PROCID": "0"}, Config{}, "SLURM_NTASKS"},
		{"single-secret", map[string]string{"STOKE_SECRET": "k", "SLURM_JOB_ID": "77"}, Config{WorldSize: 1, LocalWorldSize: 1, Secret: "k", JobID: "77"}, ""},
		{"torchrun-id", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "r9", "SLURM_JOB_ID": "77", "STOKE_SECRET": "k"},
			Config{WorldSize: 2, Port: 1, JobID: "r9", Secret: "k"}, ""},
		// torchrun's default id is the same for every job: Slurm's says more.
		{"torchrun-none", map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "77"},
			Config{WorldSize: 2, Port: 1, JobID: "77"}, ""},
		{"slurm-id", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "4242", "MASTER_ADDR": "m", "MASTER_PORT": "1"},
			Config{Rank: 1, WorldSize: 2, Addr: "m", Port: 1, JobID: "4242"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("FromEnv() = %+v, %v; want an error naming %s", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FromEnv() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c   Config
		err string
	}{
		{Config{}, ""},
		{Config{Rank: 1, WorldSize: 2, Port: 1}, ""},
		{Config{WorldSize: -1}, "WorldSize -1"},
		{Config{Rank: 1}, "Rank 1"},
		{Config{WorldSize: 2}, "Port"},
		{Config{WorldSize: 2, Port: 70000}, "Port 70000"},
		{Config{Timeout: -time.Second}, "Timeout"},
		{Config{LocalWorldSize: 3}, "LocalWorldSize 3"},
		{Config{RestartCount: -1}, "RestartCount"},
	} {
		err := tc.c.Validate()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v.Validate() = %v; want %q", tc.c, err, tc.err)
		}
	}
	c := Config{WorldSize: 2}
	c.Validate()
	if c.Timeout != 0 || c.Addr != "" {
		t.Errorf("Validate filled defaults")
	}
}

func TestConfigStringHidesSecret(t *testing.T) {
	c := Config{Rank: 1, WorldSize: 2, Secret: "hunter2"}
	for _, f := range []string{"%v", "%+v", "%s"} {
		if got := fmt.Sprintf(f, c); strings.Contains(got, "hunter2") || !strings.Contains(got, "Secret:[redacted]") || !strings.Contains(got, "Rank:1") {
			t.Errorf("Sprintf(%q, config) = %q; want the fields with the secret redacted", f, got)
		}
	}
}
