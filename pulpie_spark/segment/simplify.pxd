# C types for the compiled build of simplify.py (setup.py); the .py stays the reference.
# Internal helpers are cpdef: direct C calls inside the module, still callable from Python.
import cython
from cpython.unicode cimport (
    PyUnicode_CopyCharacters, PyUnicode_Find, PyUnicode_FindChar, PyUnicode_New, PyUnicode_Tailmatch,
)

cdef extern from "Python.h":
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(object)

@cython.final
cdef class _El:
    cdef public str tag
    cdef public str attrs
    cdef public _El parent
    cdef public list children
    cdef public Py_ssize_t name_end, open_end, close_start, close_end, text_end, tail_end
    cdef public str text, tail
    cdef public bint hbd, block, data_table, list_content
    cdef public _El context
    cdef public str _path_text
    cdef public Py_ssize_t _path_depth, name_flags, opens

cdef list _NO_CHILDREN

@cython.locals(el=_El)
cpdef _El _new_el(str tag, str attrs, _El parent)

cdef Py_ssize_t _TOKEN_END, _TOKEN_START, _TOKEN_RAW, _TOKEN_OTHER, _TOKEN_TEXT
cdef Py_ssize_t _IN_TABLE, _IN_LIST, _IN_DL
cdef Py_ssize_t _REMOVED, _VOID, _LEAF, _TABLE_PART, _BODY, _DETAILS, _IMG, _LIST, _NO_END_TAG, _NO_CALC
cdef tuple _NO_INFO
# Private lookup tables as typed module globals: direct dict/set calls, no name lookups.
cdef str _CLASS, _ID, _SRC, _ALT, _STYLE
cdef dict _TAG_INFO, _START_TAG, _END_TAG, _CONTEXT_OF, _CONTEXT_KIND, _INVISIBLE_STYLE, _LIST_PARENTS
cdef frozenset _LIBXML_VOID, _HTML5_VOID, _SWALLOWING, _TABLE_OR_INLINE, _NO_CALC_TEXT_TAGS
cdef frozenset _UNWRAPPABLE, _LIST_TAGS, _END_TAGLESS
cdef tuple _RAW_TEXT_TAGS

cpdef str _unescape(str text)

cdef Py_ssize_t _find_char(str s, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end) except -2
cdef Py_ssize_t _find(str s, str sub, Py_ssize_t start) except -2
@cython.locals(ch=cython.Py_UCS4)
cdef bint _is_space(str s) except -1
cdef bint _starts_with(str s, str prefix, Py_ssize_t start) except -1

@cython.locals(i=Py_ssize_t, j=Py_ssize_t, value=str)
cpdef _attr_value(str attrs, str key, default=*)

@cython.locals(attrs=str, style=str, decl=str, key=str, sep=str, value=str)
cpdef bint _is_hidden(_El el, _El parent)

@cython.locals(n=Py_ssize_t, next_start=Py_ssize_t, start=Py_ssize_t, pos=Py_ssize_t,
               text_end=Py_ssize_t, end=Py_ssize_t, open_end=Py_ssize_t, space=Py_ssize_t,
               depth=Py_ssize_t, skip_depth=Py_ssize_t, kind=Py_ssize_t,
               second=cython.Py_UCS4, third=cython.Py_UCS4,
               el=_El, parent=_El, cur=_El, last=_El, prev=_El, root=_El,
               stack=list, post_order=list, tables=list, lists=list, contexts=list, info=tuple,
               flags=Py_ssize_t, context_of=Py_ssize_t, context_kind=Py_ssize_t,
               raw_tag=str, text=str, tag=str, attrs_s=str, attrs=str, skip_tag=str,
               tail_mode=str)
cpdef tuple _build_tree(str s)

@cython.locals(attrs=str, stack=list, node=_El)
cpdef bint _is_data_table(_El table)

@cython.locals(children=list, allowed=tuple, c=_El, node=_El, stack=list, tag=str)
cpdef bint _is_content_list(_El lst)

@cython.locals(el=_El, tag=str, table=_El, lst=_El, blk=bint)
cpdef _classify(list post_order, list tables, list lists)

@cython.locals(node=_El, child=_El, frame=_Frame, idx=Py_ssize_t, children=list, items=list, stack=list,
               out=list, tail=str, stripped=str, is_br=bint)
cpdef list _paragraphs(_El root)

@cython.final
cdef class _Frame:
    cdef public _El node
    cdef public Py_ssize_t next_child, run_start, run_end
    cdef public list items

@cython.locals(text=str, stripped=str, frame=_Frame)
cpdef _Frame _frame(_El node)

# The copy path (blocks over the cut length): nodes are [tag, start tag, text, tail, kids] lists.
@cython.locals(top=list, stack=list, src=_El, dst=list, kids=list, tag=str, dts=list, out=list,
               c=_El, copy=list, i=Py_ssize_t)
cpdef list _copy(_El el)

@cython.locals(top=list, kids=list, last_br=Py_ssize_t, i=Py_ssize_t, copy=list)
cpdef list _run_copy(_El parent, list items)

@cython.locals(kids=list, dts=list, i=Py_ssize_t)
cpdef _shorten_list(list node)

@cython.locals(slots=list, parents=dict, total=Py_ssize_t, stack=list, node=list, text=str,
               kids=list, kid=list, current=Py_ssize_t, done=bint, value=str, n=Py_ssize_t,
               child=list, parent=list, j=Py_ssize_t, slot=Py_ssize_t, k=list)
cpdef _truncate(list top, Py_ssize_t max_length)

@cython.locals(parts=list, stack=list, tag=str, kids=list, tail=str)
cpdef str _serialize(list top, str item_id)

@cython.locals(words=list, collapsed=str)
cpdef str _esc_text(str text)

@cython.locals(ch=cython.Py_UCS4, after_space=bint)
cpdef bint _plain_ascii(str text) except -1
cpdef str _esc_uri(str value)
cpdef str _esc_markup(str value)
cpdef str _attr(str name, str value)

@cython.locals(dts=list)
cpdef list _shortened(str tag, list kids)

@cython.locals(tag=str, attrs=str, out=str, src=str, alt=str, cls=str, ident=str)
cpdef str _open_tag(_El el)

@cython.locals(by_attrs=dict, start_tag=str, attrs=str)
cpdef str _start_tag(_El el, dict start_tags)

@cython.locals(src=str)
cpdef str _kept_src(str attrs)
cpdef bint _img_has_src(_El el)

@cython.locals(node=_El, total=Py_ssize_t, meaningful=bint, excluded=bint, tag=str, kids=list,
               parts=list, stack=list, flags=list, tail=str, name_flags=Py_ssize_t, open_tag=str,
               end_tag=str)
cpdef object _render(_El top, str text, list kids, _El no_tail, str item_id, Py_ssize_t cutoff_length,
                     dict start_tags)

@cython.locals(name=str, attrs=str, cls=str, words=list, ident=str)
cpdef str _segment(_El el)

@cython.locals(pending=list, node=_El, text=str, depth=Py_ssize_t)
cpdef str _path_of(_El el)

@cython.locals(paragraphs=list, blocks=list, paths=list, inserts=list, seen_runs=set, start_tags=dict,
               kind=str, el=_El, kid=_El, items=list, kids=list, text=str, tail=str, no_tail=_El,
               leading=list, key=tuple, item_id=str, run_start=Py_ssize_t, run_end=Py_ssize_t)
cpdef tuple _page_blocks(_El root, list post_order, list tables, list lists, Py_ssize_t cutoff_length)

@cython.locals(el=_El)
cpdef _release(_El root, list post_order)

@cython.locals(parts=list, last=Py_ssize_t, offset=Py_ssize_t, key=Py_ssize_t, text=str,
               size=Py_ssize_t, pos=Py_ssize_t, out=str)
cpdef str _splice(str serialized, list inserts)
