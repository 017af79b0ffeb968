# Homebrew formula for coogle: it installs the release's prebuilt binaries (the universal one on
# macOS, signed as the pkg's are; each Linux architecture's), and builds from git for `--HEAD`.
# scripts/release.sh writes the archive section for each release; the rest is maintained by
# hand. tests/it/distribution.rs checks it against a release built here: `ruby -c`, every url
# and sha256 against the archives and SHA256SUMS, the install block against each archive's
# layout, and the test block against the installed result (tests/it/support/brew_formula_harness.rb).
class Coogle < Formula
  desc "Share one stdio MCP server (Google Workspace MCP) among many AI-agent sessions"
  homepage "https://github.com/coogle-dev/coogle"
  license "MIT"

  # >>> archives: written by scripts/release.sh
  version "0.1.0"

  on_macos do
    url "https://github.com/coogle-dev/coogle/releases/download/v0.1.0/coogle-0.1.0-universal-apple-darwin.tar.gz"
    sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  end

  on_linux do
    on_intel do
      url "https://github.com/coogle-dev/coogle/releases/download/v0.1.0/coogle-0.1.0-x86_64-unknown-linux-gnu.tar.gz"
      sha256 "0000000000000000000000000000000000000000000000000000000000000000"
    end
    on_arm do
      url "https://github.com/coogle-dev/coogle/releases/download/v0.1.0/coogle-0.1.0-aarch64-unknown-linux-gnu.tar.gz"
      sha256 "0000000000000000000000000000000000000000000000000000000000000000"
    end
  end
  # <<< archives

  head do
    url "https://github.com/coogle-dev/coogle.git", branch: "main"
    depends_on "rust" => :build
  end

  def install
    if build.head?
      system "cargo", "install", *std_cargo_args
      generate_completions_from_executable(bin/"coogle", "completions")
      (man1/"coogle.1").write Utils.safe_popen_read(bin/"coogle", "completions", "--man")
    else
      # The archive's layout (scripts/release.sh): `coogle mcp` execs the coogle-mcp beside it.
      bin.install "coogle", "coogle-mcp"
      bash_completion.install "completions/coogle.bash" => "coogle"
      zsh_completion.install "completions/coogle.zsh" => "_coogle"
      fish_completion.install "completions/coogle.fish"
      man1.install "coogle.1"
    end
  end

  # An upgrade in place: a daemon already running becomes the new binary in its own process,
  # every session and server child kept (none running: nothing to do). Never fatal.
  def post_install
    quiet_system opt_bin/"coogle", "restart", "--daemon"
  end

  service do
    run [opt_bin/"coogle", "serve"]
    keep_alive successful_exit: false
    log_path var/"log/coogle.log"
    error_log_path var/"log/coogle.log"
    environment_variables PATH: std_service_path_env
  end

  def caveats
    <<~EOS
      Point your agents at coogle (writes the config, installs the service, patches
      ~/.claude.json with a backup):
        coogle setup
      Check everything with:
        coogle doctor
      `brew upgrade coogle` updates it, and the running daemon takes the new version in place
      (`coogle restart --daemon`: no server restarts). `brew services restart coogle` restarts
      every server; prefer `coogle restart --daemon`. (coogle self-update is for standalone installs.)
    EOS
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/coogle --version")

    # A daemon on a temporary socket with a trivial upstream (coogle's own search server, which
    # lists its tool without any key or network): its tools, which start the child on demand,
    # then `coogle status`.
    socket = testpath/"run/coogle.sock"
    config = testpath/"config.json"
    config.write <<~JSON
      {"servers": {"trivial": {"command": "#{bin}/coogle", "args": ["search-server"]}}}
    JSON
    ENV["XDG_STATE_HOME"] = (testpath/"state").to_s
    pid = spawn bin/"coogle", "serve", "--config", config, "--socket", socket
    begin
      tools = ""
      40.times do
        tools = `#{bin}/coogle tools --server trivial --config #{config} --socket #{socket} 2>&1`
        break if tools.include?("ask_google")

        sleep 0.5
      end
      assert_match "ask_google", tools
      output = ""
      40.times do
        output = `#{bin}/coogle status --config #{config} --socket #{socket} 2>&1`
        break if output.include?("trivial · ready")

        sleep 0.5
      end
      assert_match "trivial · ready", output
    ensure
      system bin/"coogle", "stop", "--socket", socket
      Process.wait(pid)
    end
  end
end
