"""What an ingest may store, when the caller knows (``mlaperf ingest --only-commits/--only-machine``): the
nightly's record step stores only the commits it planned, measured on its own machine. The measure job runs
the measured commit's code, which can leave any results file in the folder the record step reads; without this
a forged file for an unplanned commit or another machine was stored, raised alerts and counted as measured
(a security review)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from settings.pr_contract import SHA  # a full commit hash: 40 hex digits, or 64 in a SHA-256 repository


@dataclass(frozen=True)
class Expected:
    """The commits (full SHAs; None: any) and the machine (None: any) an ingest may store."""

    commits: frozenset[str] | None = None
    machine: str | None = None

    @classmethod
    def read(cls, commits_file: str | Path | None, machine: str | None) -> Expected | None:
        """From a file of full commit SHAs, one a line (the nightly's ``plan-ROUND.txt``; blank lines and
        ``#`` comments skipped) and a machine name; None when neither is given. ValueError names the file and
        its line when the file is missing or holds anything but a SHA."""
        if machine is not None and not machine.strip():
            raise ValueError("--only-machine is empty (an unset variable?): name the asv machine, or leave it out")
        if commits_file is None and machine is None:
            return None
        commits: frozenset[str] | None = None
        if commits_file is not None:
            try:
                text = Path(commits_file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"--only-commits {commits_file}: cannot be read ({exc})") from None
            lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)]
            kept = [(n, line) for n, line in lines if line and not line.startswith("#")]
            bad = next(((n, line) for n, line in kept if not SHA.fullmatch(line)), None)
            if bad is not None:
                raise ValueError(f"--only-commits {commits_file}: line {bad[0]} is not a full commit SHA: "
                                 f"{bad[1][:60]!r}")
            commits = frozenset(line for _, line in kept)
        return cls(commits, machine)

    def refusal(self, commit: str, machine: str) -> str | None:
        """Why a results file of ``commit`` on ``machine`` may not be stored here, or None."""
        if self.commits is not None and commit not in self.commits:
            return f"its commit {commit[:12]} is not one of the {len(self.commits)} expected (--only-commits)"
        if self.machine is not None and machine != self.machine:
            return f"its machine {machine!r} is not the expected {self.machine!r} (--only-machine)"
        return None
