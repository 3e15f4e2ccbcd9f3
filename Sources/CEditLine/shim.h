// libedit's native API (el_*, history) for the REPL's line editor on a terminal.
// el_set, el_get and history are variadic, which Swift cannot call: each use has a small
// non-variadic wrapper here.
#include <stdio.h>
#include <histedit.h>
#include <sys/ioctl.h>
#include <unistd.h>

typedef char *(*simp_prompt_fn)(EditLine *);
typedef unsigned char (*simp_key_fn)(EditLine *, int);

/// Emacs keys, the prompt (non-printing sequences between \1 marks), the history, Tab bound
/// to `complete`, libedit's signal handling (the terminal is restored on SIGINT and resized
/// on SIGWINCH), then ~/.editrc.
static inline void simp_el_configure(EditLine *el, History *h, simp_prompt_fn prompt, simp_key_fn complete, void *data) {
    el_set(el, EL_EDITOR, "emacs");
    el_set(el, EL_SIGNAL, 1);
    el_set(el, EL_CLIENTDATA, data);
    el_set(el, EL_PROMPT_ESC, prompt, '\1');
    el_set(el, EL_HIST, history, h);
    el_set(el, EL_ADDFN, "simp-complete", "complete a command or user name", complete);
    el_set(el, EL_BIND, "^I", "simp-complete", NULL);
    el_source(el, NULL);
}

static inline void *simp_el_clientdata(EditLine *el) {
    void *data = NULL;
    el_get(el, EL_CLIENTDATA, &data);
    return data;
}

/// Unbuffered: el_gets returns after each key, so a poll loop can print between keys.
/// Turning it on resets the line and shows the prompt; off puts the terminal back.
static inline void simp_el_unbuffered(EditLine *el, int on) { el_set(el, EL_UNBUFFERED, on); }

/// Draws the prompt and the line again from the cursor's row, column 0.
static inline void simp_el_refresh(EditLine *el) { el_set(el, EL_REFRESH); }

static inline History *simp_history_open(int size) {
    HistEvent event;
    History *h = history_init();
    if (h == NULL) return NULL;
    history(h, &event, H_SETSIZE, size);
    history(h, &event, H_SETUNIQUE, 1);
    return h;
}

static inline void simp_history_enter(History *h, const char *line) {
    HistEvent event;
    history(h, &event, H_ENTER, line);
}

static inline int simp_history_load(History *h, const char *path) {
    HistEvent event;
    return history(h, &event, H_LOAD, path);
}

static inline int simp_history_save(History *h, const char *path) {
    HistEvent event;
    return history(h, &event, H_SAVE, path);
}

/// The entries, newest first: simp_history_first, then simp_history_next until NULL.
static inline const char *simp_history_first(History *h) {
    HistEvent event;
    return history(h, &event, H_FIRST) == 0 ? event.str : NULL;
}

static inline const char *simp_history_next(History *h) {
    HistEvent event;
    return history(h, &event, H_NEXT) == 0 ? event.str : NULL;
}

/// The terminal's width in columns, 80 when unknown.
static inline int simp_terminal_columns(int fd) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return 80;
}
