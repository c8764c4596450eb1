"""The default address rule (the same as the C library's hidet_default_address()) and address
parsing."""
import unittest

from support import hidetd
from hidetd._http import parse_address


class DefaultAddress(unittest.TestCase):
    def rule(self, env, existing=()):
        return hidetd.default_address(env, exists=lambda p: p in existing)

    def test_env_wins(self):
        self.assertEqual(self.rule({"HIDETD_SOCKET": "/x/s.sock", "XDG_RUNTIME_DIR": "/run/user/1"},
                                   {"/run/user/1/hidetd.sock", "/run/hidetd/hidetd.sock"}), "/x/s.sock")
        self.assertEqual(self.rule({"HIDETD_SOCKET": "http://127.0.0.1:8734"}), "http://127.0.0.1:8734")

    def test_user_socket_when_it_exists(self):
        self.assertEqual(self.rule({"XDG_RUNTIME_DIR": "/run/user/1"},
                                   {"/run/user/1/hidetd.sock", "/run/hidetd/hidetd.sock"}),
                         "/run/user/1/hidetd.sock")

    def test_system_socket_before_a_missing_user_one(self):
        self.assertEqual(self.rule({"XDG_RUNTIME_DIR": "/run/user/1"}, {"/run/hidetd/hidetd.sock"}),
                         "/run/hidetd/hidetd.sock")
        self.assertEqual(self.rule({}, {"/run/hidetd/hidetd.sock"}), "/run/hidetd/hidetd.sock")

    def test_fallbacks(self):
        self.assertEqual(self.rule({"XDG_RUNTIME_DIR": "/run/user/1"}), "/run/user/1/hidetd.sock")
        self.assertEqual(self.rule({"XDG_CACHE_HOME": "/c", "HOME": "/h"}), "/c/hidetd/hidetd.sock")
        self.assertEqual(self.rule({"HOME": "/h"}), "/h/.cache/hidetd/hidetd.sock")
        self.assertEqual(self.rule({}), "./hidetd.sock")
        # Relative directories are ignored, like an empty HIDETD_SOCKET.
        self.assertEqual(self.rule({"HIDETD_SOCKET": "", "XDG_RUNTIME_DIR": "rel", "HOME": "h"}),
                         "./hidetd.sock")


class ParseAddress(unittest.TestCase):
    def test_forms(self):
        self.assertEqual(parse_address("/run/h.sock"), ("unix", "/run/h.sock", ""))
        self.assertEqual(parse_address("./h.sock"), ("unix", "./h.sock", ""))
        self.assertEqual(parse_address("unix:/a/b"), ("unix", "/a/b", ""))
        self.assertEqual(parse_address("http://127.0.0.1:8734/"), ("http", "127.0.0.1:8734", ""))
        self.assertEqual(parse_address("http://h:80/api/"), ("http", "h:80", "/api"))

    def test_refused(self):
        for bad in ("", "hidetd.sock", "ftp://x", "unix:", "http://", "https://h"):
            with self.assertRaises(ValueError, msg=bad):
                parse_address(bad)
        with self.assertRaisesRegex(ValueError, "socket path"):
            hidetd.Client("hidetd.sock")


if __name__ == "__main__":
    unittest.main()
