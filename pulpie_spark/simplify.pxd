# C types for the compiled build of simplify.py (setup.py); the .py stays the reference.
# Internal helpers are cpdef: direct C calls inside the module, still callable from Python.
import cython

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
    cdef public tuple _path
    cdef public str _path_text

cdef list _NO_CHILDREN

@cython.locals(el=_El)
cpdef _El _new_el(str tag, str attrs, _El parent)

cdef Py_ssize_t _TOKEN_END, _TOKEN_START, _TOKEN_RAW, _TOKEN_OTHER, _TOKEN_TEXT
# Private lookup tables as typed module globals: direct dict/set calls, no name lookups.
cdef str _CLASS, _ID, _SRC, _ALT, _STYLE
cdef dict _TAG_NAME, _START_TAG, _END_TAG, _CONTEXT_OF, _CONTEXT_KIND, _INVISIBLE_STYLE, _LIST_PARENTS
cdef frozenset _LIBXML_VOID, _HTML5_VOID, _SWALLOWING, _TABLE_OR_INLINE, _NO_CALC_TEXT_TAGS
cdef frozenset _UNWRAPPABLE, _LIST_TAGS, _END_TAGLESS
cdef tuple _RAW_TEXT_TAGS

cpdef str _unescape(str text)

@cython.locals(i=Py_ssize_t, j=Py_ssize_t, value=str)
cpdef _attr_value(str attrs, str key, default=*)

@cython.locals(attrs=str, style=str, decl=str, key=str, sep=str, value=str)
cpdef bint _is_hidden(_El el, _El parent)

@cython.locals(n=Py_ssize_t, next_start=Py_ssize_t, start=Py_ssize_t, pos=Py_ssize_t,
               text_end=Py_ssize_t, end=Py_ssize_t, open_end=Py_ssize_t, space=Py_ssize_t,
               depth=Py_ssize_t, skip_depth=Py_ssize_t, kind=Py_ssize_t,
               second=cython.Py_UCS4, third=cython.Py_UCS4,
               el=_El, parent=_El, cur=_El, last=_El, prev=_El, root=_El,
               stack=list, post_order=list, tables=list, lists=list, contexts=dict,
               raw_tag=str, text=str, tag=str, name=str, attrs_s=str, attrs=str, skip_tag=str,
               context_kind=str, tail_mode=str)
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

@cython.locals(out=list, src=str, alt=str, cls=str, ident=str)
cpdef object _clean_attrs(str tag, str attrs)

@cython.locals(words=list, collapsed=str)
cpdef str _esc_text(str text)
cpdef str _esc_markup(str value)
cpdef str _attr(str name, str value)

@cython.locals(dts=list)
cpdef list _shortened(str tag, list kids)

@cython.locals(cleaned=list)
cpdef str _open_tag(_El el)

@cython.locals(by_attrs=dict, start_tag=str)
cpdef str _start_tag(_El el, dict start_tags)

@cython.locals(attrs=str, src=str)
cpdef bint _img_has_src(_El el)

@cython.locals(node=_El, total=Py_ssize_t, meaningful=bint, excluded=bint, tag=str, kids=list,
               parts=list, stack=list, flags=list, tail=str, no_calc=frozenset, open_tag=str,
               end_tag=str)
cpdef object _render(_El top, str text, list kids, _El no_tail, str item_id, Py_ssize_t cutoff_length,
                     dict start_tags)

@cython.locals(name=str, attrs=str, cls=str, words=list, ident=str)
cpdef str _segment(_El el)

@cython.locals(pending=list, node=_El, segments=tuple)
cpdef str _path_of(_El el)

@cython.locals(paragraphs=list, blocks=list, paths=list, inserts=list, seen_runs=set, start_tags=dict,
               kind=str, el=_El, kid=_El, items=list, kids=list, text=str, tail=str, no_tail=_El,
               leading=list, key=tuple, item_id=str, run_start=Py_ssize_t, run_end=Py_ssize_t)
cpdef tuple _page_blocks(_El root, list post_order, list tables, list lists, Py_ssize_t cutoff_length)

@cython.locals(parts=list, last=Py_ssize_t, offset=Py_ssize_t, key=Py_ssize_t, text=str)
cpdef str _splice(str serialized, list inserts)
